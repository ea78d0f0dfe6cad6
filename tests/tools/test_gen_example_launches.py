"""verl's example launches as a user's shell would run them (tools/gen_example_launches.py), judged by
the rules at the release they come from.

The truth for the stored launches is verl's own start-up (tools/verl_differential.py; the review of
issue 23 ran it at v0.6.1 and HEAD with verl 0.6.1 and 0.9.1): a variable the scheduler sets to a
count (``trainer.nnodes=$SLURM_JOB_NUM_NODES``, examples/gspo_trainer/test_gspo_3b_math.sh at
v0.7.0) is a whole number in the job, so the launch must not fail ``config_values`` for a path
stand-in no shell produces.
"""

import json
import os
import sys

import pytest
from envs import real_env
from verl_fixtures import tiny_inputs

from preflight.launch.compose import compose_stored
from preflight.launch.overrides import parse_launch
from preflight.launch.rules import evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from gen_example_launches import bash_words, launch_of, launch_words  # noqa: E402
import verl_differential  # noqa: E402
from verl_differential import differential, localise  # noqa: E402

INPUTS = {"model": "/tmp/verl-examples/model", "train": "/tmp/verl-examples/train.parquet",
          "test": "/tmp/verl-examples/test.parquet"}


def _stored(path, ref):
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    return [x for x in doc["launches"] if x["path"] == path and ref in x["refs"]][0]


#: Scripts whose launch bash itself expands (bash_words: the script's assignment statements, then the
#: launch's words through printf, run by real bash in a temp dir); the extractor must match word for word.
BASH = {
    "arrays": r"""ARR=(a.x=1 "b.y=two words" 'c.z=$NOT')
ARR+=(d.w=4)
EMPTY=()
MULTI=(
    e.v=5   # a comment inside the array
    # a comment line
    "f.u=${ARR[1]}"
)
python3 -m verl.trainer.main_ppo "${ARR[@]}" "${EMPTY[@]}" ${MULTI[@]} "g.n=${#ARR[@]}" "h.s=${ARR[*]}" i.t=${ARR[*]} j.z=$ARR
""",
    "arithmetic": r"""a=3; b=4
c=$((a + b))
d=$(((a + b) * c))
e=$(( (a + $b) * 2 - 10 / 3 ))
f=$((2**10 % 7)) g=$(( -7 / 2 )) h=$(( -7 % 3 ))
expr=1+2
k=$((2*expr)) m=$((2*$expr))
n=$((a > b ? a : b))
o=$(( $((a*2)) + 0x10 + 010 ))
python3 -m verl.trainer.main_ppo x.c=$c x.d=$d x.e=$e x.f=$f x.g=$g x.h=$h x.k=$k x.m=$m x.n=$n x.o=$o \
    "x.p=$(( (c - 1) * (d + 1) ))"
""",
    "defaults": r"""EMPTY=
X=${UNSET_A:-dflt}
Y=${UNSET_B:=assigned}
python3 -m verl.trainer.main_ppo a.x=$X a.y=$Y a.yy=$UNSET_B a.e="[${EMPTY-dash}]" a.f="[${EMPTY:-colon}]" \
    a.p=${X:+plus} a.q=${UNSET_C:+plus}end a.n=${UNSET_D:-${UNSET_E:-2}} a.w=${UNSET_H:-two words}
""",
    "quotes": r"""NAME="a b"
LIST="['$NAME', 'c']"
python3 -m verl.trainer.main_ppo data.files="$LIST" data.raw=$LIST 'lit.x=$NAME' "dq.x=it's \"q\"" \
    n.x="${UNSET_F:-"d e"}" s.x="${UNSET_G:-'s'}" m.x=pre"$NAME"'post' e.x=a\ b
""",
    "continuations": r"""CONFIG="
    a.x=1 \
    a.y=2
    a.z=3"
python3 -m verl.trainer.main_ppo \
    b.x=1 \
    $CONFIG \
    "$@"
""",
    "continuation at the end": "A=1\npython3 -m verl.trainer.main_ppo a.x=$A \\",
    "declarations": r"""export A=1 B=two
declare C=3
local D=4
export E={x,y}
readonly F=6
unset B
python3 -m verl.trainer.main_ppo a=$A b=${B:-gone} c=$C d=$D e=$E f=$F
""",
    "patterns": r"""P=actor_rollout_ref.actor.x=1
M=/models/Qwen/Qwen2.5-7B
python3 -m verl.trainer.main_ppo "${P//actor_rollout_ref.actor/critic}" n.x=${M##*/} d.x=${M%/*} u.x=${M^^} \
    l.x=${M,,} s.x=${M:8:4} r.x=${M/Qwen/Q}
""",
    "words": r"""cat > /tmp/never <<EOF
python3 -m verl.trainer.main_ppo not.this=1
EOF
A=1; B=2 && C=3
python3 -m verl.trainer.main_ppo x.l={a,b} x.s=~/d y=~/h a=$A b=$B c=$C 2>&1 | tee log.txt
""",
}


@pytest.mark.parametrize("name", sorted(BASH))
def test_launch_words_are_bash_s_own(name):
    assert launch_words(BASH[name]) == bash_words(BASH[name])


#: Scripts that choose their launch in ``if`` branches on values they set (the v0.7.0 GSPO/SAPO scripts
#: pick the Megatron or FSDP config by ``[[ $backend == megatron ]]``); the truth is real bash running the
#: whole script, with ``python3`` a function that prints its words (the scripts run no other command).
IFS = {
    "gspo": r"""backend=megatron # fsdp, fsdp2, megatron
adv_estimator=grpo
if [[ $backend == "megatron" ]]; then
    CONFIG_NAME=ppo_megatron_trainer
    if [[ $adv_estimator == "gae" ]]; then
        EXTRA="critic.x=1"
    else
        EXTRA="actor.y=2"
    fi
else # fsdp, fsdp2
    CONFIG_NAME=ppo_trainer
    EXTRA="actor.z=3"
fi
rollout_name=vllm
if [ "$rollout_name" = "vllm" ]; then
    export VLLM_USE_V1=1
fi
python3 -m verl.trainer.main_ppo --config-name=$CONFIG_NAME $EXTRA r.n=$rollout_name
""",
    "elif and negation": r"""MODE=b
if [ "$MODE" = a ]; then X=1
elif [ "$MODE" != b ]; then X=2
elif ! [[ -z $MODE ]]; then X=3
else X=4
fi
if test -n "${UNSET_Q:-}"; then Y=yes; else Y=no; fi
if [[ ${MODE:-z} == b ]]; then Z=ok; fi
python3 -m verl.trainer.main_ppo x=$X y=$Y z=$Z
""",
    "assigned only in a skipped branch": r"""rollout_mode="sync"
if [ "$rollout_mode" = "async" ]; then
    export VLLM_USE_V1=1
    return_raw_chat="True"
fi
python3 -m verl.trainer.main_ppo data.return_raw_chat=$return_raw_chat a=1
""",
    "launch inside a branch": r"""USE_MEGATRON=0
if [ $USE_MEGATRON -eq 1 ]; then
    N=1
fi
if [ "$USE_MEGATRON" == "1" ]; then
    python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer a=1
else
    python3 -m verl.trainer.main_ppo a=2
fi
""",
}


def _bash_runs(script):
    import subprocess

    stub = "python3() { printf '%s\\0' python3 \"$@\"; exit 0; }\n"
    p = subprocess.run(["bash", "-c", stub + script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10,
                       env={"PATH": "/usr/bin:/bin", "HOME": "/tmp/verl-examples/home", "LC_ALL": "C"})
    assert p.returncode == 0, p.stderr
    return p.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize("name", sorted(IFS))
def test_if_branches_are_the_ones_bash_takes(name):
    """The launch read through the ``if`` branches bash takes (no stand-ins: every value is set), the
    same words as real bash running the whole script; before, both branches were read and the
    later assignment won (the v0.7.0 GSPO/SAPO scripts got the FSDP config with Megatron options)."""
    assert launch_words(IFS[name]) == _bash_runs(IFS[name])
    assert bash_words(IFS[name]) == _bash_runs(IFS[name])  # the program --check-bash runs reads them alike


def test_an_undecidable_test_reads_every_branch():
    """A file test (or a value the user's shell sets) is left undecided: every branch is read, as before."""
    script = "A=1\nif [ -f /etc/x ]; then A=2; else A=3; fi\nif [[ $FROM_USER == y ]]; then B=4; fi\n" \
             "python3 -m verl.trainer.main_ppo a=$A b=$B\n"
    words = launch_words(script)
    assert words[-2:] == ["a=3", "b=4"], words


def test_arrays_and_arithmetic_values():
    """Some of the words above spelled out (bash gives the same: the test before)."""
    arrays = launch_words(BASH["arrays"])
    assert arrays[3:9] == ["a.x=1", "b.y=two words", "c.z=$NOT", "d.w=4", "e.v=5", "f.u=b.y=two"]
    assert "g.n=4" in arrays and "h.s=a.x=1 b.y=two words c.z=$NOT d.w=4" in arrays and "j.z=a.x=1" in arrays
    got = dict(w.split("=", 1) for w in launch_words(BASH["arithmetic"])[3:])
    assert got == {"x.c": "7", "x.d": "49", "x.e": "11", "x.f": "2", "x.g": "-3", "x.h": "-1", "x.k": "6",
                   "x.m": "4", "x.n": "4", "x.o": "30", "x.p": "300"}


#: Launches stored incomplete before the extractor read arrays, multi-line strings and nested $(( )):
#: (path, ref, an override the script's bash gives that the old extraction lacked or got wrong).
COMPLETED = [
    ("examples/sapo_trainer/run_qwen30b_sapo.sh", "HEAD", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=30720"),
    ("examples/gspo_trainer/run_qwen30b_gspo.sh", "HEAD", "actor_rollout_ref.actor.clip_ratio_high=4e-4"),
    ("examples/grpo_trainer/run_qwen2-32b_sglang_fsdp_npu.sh", "HEAD", "data.train_batch_size=32"),
    ("examples/mtp_trainer/test_dapo_mimo_7b_with_mtp_math_megatron.sh", "HEAD",
     "actor_rollout_ref.model.mtp.enable=True"),
    ("examples/grpo_trainer/run_qwen3moe-30b_megatron_96gb.sh", "HEAD",
     "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=10240"),
    ("examples/grpo_trainer/run_qwen2-7b_math_megatron_lora.sh", "HEAD", "actor_rollout_ref.model.lora.rank=256"),
]


@pytest.mark.parametrize("path,ref,override", COMPLETED, ids=[c[0].split("/")[-1] for c in COMPLETED])
def test_stored_launches_are_complete(path, ref, override):
    assert override in _stored(path, ref)["overrides"]


def test_no_stored_override_holds_shell_syntax():
    """No ``$((``, ``[@]`` or unbalanced parenthesis (``...=1)``: a nested ``$(( ))`` cut short) is stored."""
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        stored = [o for x in json.load(fh)["launches"] for o in x["overrides"]]
    bad = [o for o in stored if "$((" in o or "[@]" in o or "[*]" in o or o.count("(") != o.count(")")]
    assert bad == []


def test_scheduler_counts_stand_in_as_whole_numbers():
    script = "python3 -m verl.trainer.main_ppo \\\n  trainer.nnodes=$SLURM_JOB_NUM_NODES \\\n" \
             "  trainer.n_gpus_per_node=${NGPUS_PER_NODE} data.train_files=$DATA_DIR/x.parquet\n"
    got = launch_of(script)["overrides"]
    nnodes = dict(o.split("=", 1) for o in got)
    assert int(nnodes["trainer.nnodes"]) >= 1 and int(nnodes["trainer.n_gpus_per_node"]) >= 1
    assert nnodes["data.train_files"].startswith("/tmp/verl-examples/")


def test_nested_defaults_resolve():
    """``export GPUS_PER_NODE=${SLURM_GPUS_ON_NODE:-${GPUS_PER_NODE:-2}}`` (recipe/langgraph_agent at
    v0.6.0) and ``CKPTS_DIR=${CKPTS_DIR:-"${RAY_DATA_HOME}/ckpts"}`` (recipe/dapo): bash gives 2 and a
    path; a ``${...`` left in an override would be a Hydra interpolation no shell produces."""
    script = 'RAY_DATA_HOME=${RAY_DATA_HOME:-"${HOME}/verl"}\nCKPTS_DIR=${CKPTS_DIR:-"${RAY_DATA_HOME}/ckpts"}\n' \
             "export GPUS_PER_NODE=${SLURM_GPUS_ON_NODE:-${GPUS_PER_NODE:-2}}\n" \
             "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$GPUS_PER_NODE " \
             'trainer.default_local_dir="${CKPTS_DIR}"\n'
    got = dict(o.split("=", 1) for o in launch_of(script)["overrides"])
    assert got["trainer.n_gpus_per_node"] == "2"
    assert got["trainer.default_local_dir"].endswith("/verl/ckpts") and "$" not in got["trainer.default_local_dir"]
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        stored = [o for x in json.load(fh)["launches"] for o in x["overrides"]]
    assert not [o for o in stored if "${" in o.partition("=")[2] and "${oc." not in o and "${." not in o], \
        "an unexpanded shell variable is stored"


@pytest.mark.parametrize("path,ref,release", [
    ("examples/gspo_trainer/test_gspo_3b_math.sh", "v0.7.0", "0.7.0"),
    ("examples/gspo_trainer/test_gspo_3b_math_slurm.sh", "v0.7.0", "0.7.0"),
])
def test_slurm_example_launch_has_no_fail(path, ref, release):
    x = _stored(path, ref)
    comp = compose_stored(parse_launch(localise(x["overrides"], INPUTS)), release=release)
    assert comp.error is None, comp.error
    assert comp.get("trainer.nnodes") == 1
    _plan, found, _note = evaluate(comp.get, release)
    assert [(f.id, f.message) for f in found if f.status == "fail"] == []


@pytest.mark.realenv
def test_061_fails_agree_with_verl(tmp_path):
    """The FAIL rows on verl 0.6.1's own examples are verl's verdict too: run_with_rollout_corr.sh sets no
    micro-batch size and run_deepseek7b_llm_pfppo.sh loses its overrides at a ``\\  # comment`` line (bash
    ends the command there, as the extractor does); verl 0.6.1's start-up rejects both, and no rule fails
    a launch it accepts."""
    env = real_env("verl061-tf4", ["verl==0.6.1", "torch==2.13.0", "transformers>=4.51,<5", "pyarrow>=19,<20"])
    paths = ("examples/rollout_correction/run_with_rollout_corr.sh",
             "examples/ppo_trainer/run_deepseek7b_llm_pfppo.sh",
             "examples/tuning/7b/qwen2-7b_grpo-lora_1_h100_fsdp_vllm.sh")
    everything = verl_differential.launches_for
    try:
        verl_differential.launches_for = lambda ref, own_dirs=False: [x for x in everything(ref, own_dirs)
                                                                       if x["path"] in paths]
        rep = differential(env, "v0.6.1", tiny_inputs(env, str(tmp_path / "tiny"), 32, 0), "0.6.1")
    finally:
        verl_differential.launches_for = everything
    rows = {c["path"]: c for c in rep["cases"]}
    assert rep["ran"] == 3, rep["cases"]
    for p in paths[:2]:
        assert rows[p]["verl"] != "accepted" and "micro_batch_set.actor" in rows[p]["rules"], rows[p]
    assert rows[paths[2]]["verl"] == "accepted" and rows[paths[2]]["rules"] == [], rows[paths[2]]
    assert rep["rule_fails_verl_accepts"] == [] and rep["disagreements"] == []


def _git(*args, cwd):
    import subprocess

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"] + list(args),
                   cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_localise_takes_pwd_relative_repo_files_from_the_tag(tmp_path):
    """examples/sglang_multiturn/run_qwen3_4b_dapo_multiturn.sh at v0.6.1 names recipe/retool/retool.py
    as ``$PROJECT_DIR/recipe/...`` with ``PROJECT_DIR="$(pwd)"`` (the scripts run from verl's root): the
    stored launch holds the extractor's ``$(command)`` stand-in, and the localiser takes the file from the
    tag like a plain ``recipe/...`` path. A git repository here stands in for verl's at v0.6.1."""
    from gen_example_launches import CMD

    src = tmp_path / "verl"
    (src / "recipe" / "retool").mkdir(parents=True)
    (src / "recipe" / "retool" / "retool.py").write_text("def compute_score(*a, **k):\n    return 1.0\n")
    (src / "recipe" / "retool" / "sandbox_fusion_tool_config.yaml").write_text("tools: []\n")
    _git("init", "-q", cwd=str(src))
    _git("add", "-A", cwd=str(src))
    _git("commit", "-qm", "x", cwd=str(src))
    _git("tag", "v0.6.1", cwd=str(src))
    x = next(x for x in verl_differential.launches_for("v0.6.1")
             if x["path"] == "examples/sglang_multiturn/run_qwen3_4b_dapo_multiturn.sh")
    named = [o for o in x["overrides"] if "recipe/retool/" in o]
    assert len(named) == 3 and all("=%s/recipe/retool/" % CMD in o for o in named), named
    repo = {"git_dir": str(src / ".git"), "ref": "v0.6.1", "out": str(tmp_path / "copies")}
    out = dict(o.split("=", 1) for o in localise(x["overrides"], INPUTS, repo))
    for key, rel in (("custom_reward_function.path", "recipe/retool/retool.py"),
                     ("data.custom_cls.path", "recipe/retool/retool.py"),
                     ("actor_rollout_ref.rollout.multi_turn.tool_config_path",
                      "recipe/retool/sandbox_fusion_tool_config.yaml")):
        assert out[key] == str(tmp_path / "copies" / rel)
        with open(out[key]) as fh:
            assert fh.read() == (src / rel).read_text()
    assert out["actor_rollout_ref.model.path"] == INPUTS["model"]
    # $PWD (an unset-variable stand-in) is the same root; a file the tag lacks stays as written
    pwd = localise(["custom_reward_function.path=/tmp/verl-examples/PWD/recipe/retool/retool.py",
                    "reward_model.reward_manager=x", "custom_reward_function.name=%s/recipe/gone.py" % CMD],
                   INPUTS, repo)
    assert pwd[0] == "custom_reward_function.path=%s" % (tmp_path / "copies" / "recipe/retool/retool.py")
    assert pwd[2] == "custom_reward_function.name=%s/recipe/gone.py" % CMD
