#!/bin/bash
# The rehearsal's H200 proof (issue 25), run on the GPU node from the repository root, with the
# rehearsal's files carried in $RH (default .rh/pf: preflight.pyz built from this branch, this
# script, bench/rehearse_fixtures.py, launch.txt, wheelhouse.parts.json) and the wheelhouse parts
# carried one per call into .rh/wN/ (bench/h200_rehearse_wheelhouse.sh makes the parts,
# bench/h200_rehearse_prepare.sh lays out .rh/). TIMEOUT: the rehearsal's --timeout (default 540 s).
# The sequence of device calls and what each costs: bench/RESULTS.md.
#
#   part DIR     copy the part(s) in DIR to $WH (they stay while the machine is held)
#   install      check every part's sha256 against wheelhouse.parts.json, reassemble, pip install
#                --no-index --no-deps --target $SITE (PYTHONPATH for everything after it)
#   fixtures     bench/rehearse_fixtures.py $FX (GSM8K-shaped data, the user's model dir, the plants)
#   pass NAME    the rehearsal of launch.txt (verl's examples/grpo_trainer/run_qwen2_5-3b_gsm8k_grpo_lora.sh
#                at v0.7.0, the newest tag in the mirror read; unchanged on main) on 1 GPU -> $OUT/NAME.*
#   plant N      planted failure N (1..6) -> $OUT/plantN.*
#   full         the same launch's real start-up to its first step with the full-size Qwen2.5-0.5B
#                layout, random weights (verl run directly; no rehearsal) -> $OUT/full.*
# usage: bash bench/h200_rehearse.sh STEP [ARG] [STEP [ARG]...]
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
RH=${RH:-.rh/pf}
OUT=${OUT:-/tmp/rh-out}
WH=${WH:-/tmp/rh-wh}
SITE=${SITE:-/tmp/site}
FX=${FX:-/tmp/rhfx}
PY=${PY:-python3}
mkdir -p "$OUT" "$WH"
[ -d "$SITE" ] && export PYTHONPATH="$SITE"
PF=("$PY" -I -S "$RH/preflight.pyz")
say() { printf '\n=== %s  [%s]\n' "$*" "$(date -u +%H:%M:%S)"; }

do_install() {
    say "install: $(ls "$WH" | grep -c part-) parts"
    cp "$RH/wheelhouse.parts.json" "$WH/" || return 2
    t=$(date +%s.%N)
    (cd "$WH" && "$PY" - <<'PYEOF'
import hashlib, json
m = json.load(open("wheelhouse.parts.json"))
bad = []
for p in m["parts"]:
    h = hashlib.sha256()
    try:
        with open(p["file"], "rb") as fh:
            for b in iter(lambda: fh.read(1 << 20), b""):
                h.update(b)
    except OSError as exc:
        bad.append("%s: %s" % (p["file"], exc)); continue
    if h.hexdigest() != p["sha256"]:
        bad.append("%s: sha256 differs" % p["file"])
print("parts:", len(m["parts"]), "bad:", bad or "none")
raise SystemExit(1 if bad else 0)
PYEOF
    ) || return 2
    (cd "$WH" && cat wheelhouse.tar.part-* | tar xf -) || return 2
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "$WH"/simple/*/*.whl || return 2
    export PYTHONPATH="$SITE"
    echo "install: $("$PY" -c "import time,sys; print('%.1f' % (time.time()-float(sys.argv[1])))" "$t") s; $(du -sh "$SITE" | cut -f1)"
    "$PY" -c "import verl, vllm, ray, transformers, tensordict, transfer_queue, torch; print('verl', verl.__version__, 'vllm', vllm.__version__, 'ray', ray.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tail -3
}

do_fixtures() {
    say "fixtures in $FX"
    rm -rf "$FX"
    PYZ="$RH/preflight.pyz" "$PY" "$RH/rehearse_fixtures.py" "$FX" 2>&1 | tail -2
    sed -e "s#\$HOME/data/gsm8k#$FX/data#g" -e "s#Qwen/Qwen2.5-3B-Instruct#$FX/model#" "$RH/launch.txt" >"$FX/launch.txt"
}

rehearse() {  # NAME LAUNCH-FILE [more rehearse options]
    local name=$1 launch=$2
    shift 2
    say "rehearse $name"
    t=$(date +%s.%N)
    "${PF[@]}" rehearse --python "$PY" --gpus 1 --timeout "${TIMEOUT:-540}" --keep-workdir --json "$OUT/$name.json" \
        "$@" -- "$(cat "$launch")" >"$OUT/$name.txt" 2>&1
    rc=$?
    # the run's own log (arrival time + line, what tests/data/rehearse/*.run.log.gz hold), then the workdir goes
    "$PY" - "$OUT/$name.json" "$OUT/$name.run.log.gz" <<'PYEOF'
import gzip, json, os, shutil, sys
try:
    w = (json.load(open(sys.argv[1])).get("rehearsal") or {}).get("workdir")
except (OSError, ValueError):
    w = None
if w and os.path.isfile(os.path.join(w, "run.log")):
    with open(os.path.join(w, "run.log"), "rb") as src, gzip.open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
if w and os.path.basename(w).startswith("preflight-rehearse-"):
    shutil.rmtree(w, ignore_errors=True)
PYEOF
    echo "$name: exit $rc, wall $("$PY" -c "import time,sys; print('%.1f' % (time.time()-float(sys.argv[1])))" "$t") s"
    grep -E "^(PASS|FAIL|WARN)  +(run|phase|tokenizer|data|model|compose|cleanup|vllm)" "$OUT/$name.txt" | cut -c1-230
    pgrep -af "raylet|gcs_server|vllm|main_ppo" | grep -v pgrep | head -5 || true
}

do_plant() {
    local n=$1 f="$FX/plant$1.txt"
    case $n in
        1) sed 's#trainer.total_epochs=15#trainer.total_epochs=15 reward.custom_reward_function.path='"$FX"'/reward_raises.py#' \
               "$FX/launch.txt" >"$f" ;;
        2) sed 's#trainer.total_epochs=15#trainer.total_epochs=15 reward.custom_reward_function.path='"$FX"'/reward_missing_import.py#' \
               "$FX/launch.txt" >"$f" ;;
        3) { printf 'VLLM_ATTENTION_BACKEND=NOT_A_BACKEND '; sed 's#trainer.total_epochs=15#trainer.total_epochs=15 +actor_rollout_ref.rollout.engine_kwargs.vllm.attention_backend=NOT_A_BACKEND#' \
               "$FX/launch.txt"; } >"$f" ;;
        4) sed "s#$FX/data/train.parquet#$FX/data/bad_type.parquet#" "$FX/launch.txt" >"$f" ;;
        5) sed "s#model.path=$FX/model #model.path=$FX/model_small_vocab #" "$FX/launch.txt" >"$f" ;;
        6) sed 's#trainer.total_epochs=15#trainer.total_epochs=15 actor_rollout_ref.rollout.mode=sync#' "$FX/launch.txt" >"$f" ;;
    esac
    rehearse "plant$n" "$f"
}

do_full() {
    say "full-size start-up: Qwen2.5-0.5B layout, random weights, verl directly, to step 1"
    local m="$FX/model_full"
    rm -rf "$m"
    cp -r "$FX/model" "$m"
    "$PY" - "$m" <<'PYEOF'
import sys, torch, transformers
d = sys.argv[1]
cfg = transformers.AutoConfig.from_pretrained(d)
torch.manual_seed(0)
model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
model.save_pretrained(d, safe_serialization=True)
print("full model: %.1fM parameters" % (sum(p.numel() for p in model.parameters()) / 1e6))
PYEOF
    local tmp
    tmp=$(mktemp -d /tmp/pfrf-XXXX)
    local words
    words=$(sed -e '1s#^python3 -m verl.trainer.main_ppo##' -e 's#\\$##' -e "s#model.path=$FX/model\( \|$\)#model.path=$m #" \
        -e "s#trainer.logger='\[\"console\",\"wandb\"\]'#trainer.logger=[console]#" "$FX/launch.txt" | tr '\n' ' ')
    t=$(date +%s.%N)
    # shellcheck disable=SC2086
    (cd "$tmp" && env -u RAY_ADDRESS timeout 540 "$PY" -m verl.trainer.main_ppo $words trainer.n_gpus_per_node=1 \
        actor_rollout_ref.rollout.tensor_model_parallel_size=1 trainer.total_training_steps=1 trainer.save_freq=-1 \
        trainer.test_freq=-1 trainer.resume_mode=disable trainer.default_local_dir="$tmp/ckpt" \
        +ray_kwargs.ray_init._temp_dir="$tmp/ray" +ray_kwargs.ray_init.include_dashboard=False 2>&1) | \
        "$PY" -c "
import sys, time
t0 = float(sys.argv[1]); first = None
out = open(sys.argv[2], 'w')
for line in sys.stdin:
    t = time.time() - t0
    out.write('%.3f %s' % (t, line)); out.flush()
    if first is None and 'step:1 -' in line:
        first = t
print('full-size: first step line at %s s' % ('%.1f' % first if first else 'never'))
" "$t" "$OUT/full.log"
    echo "full-size: wall $("$PY" -c "import time,sys; print('%.1f' % (time.time()-float(sys.argv[1])))" "$t") s"
    grep -o "timing_s/[a-z_]*:[0-9.]*" "$OUT/full.log" | head -12 | tr '\n' ' '; echo
    grep -E "Error|error" "$OUT/full.log" | tail -3 | cut -c1-300
    rm -rf "$tmp"
}

while [ $# -gt 0 ]; do
    step=$1; shift
    case $step in
        part) mkdir -p "$WH"; cp "$1"/* "$WH"/; shift; ls "$WH" | tail -2 ;;
        install) do_install || { echo "install failed"; exit 2; } ;;
        fixtures) do_fixtures ;;
        pass) rehearse "$1" "$FX/launch.txt"; shift ;;
        plant) do_plant "$1"; shift ;;
        full) do_full ;;
        *) echo "unknown step $step"; exit 2 ;;
    esac
done
