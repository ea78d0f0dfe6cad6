"""verl's own start-up, run dry in the target (preflight/target/verl_startup.py), read into a
:class:`Startup`, and verl's verdict set beside the rules'.

The target script runs the entry point's own ``main`` on the config Hydra composes from the
installed verl's config directory, up to the first Ray or worker call (see the script's header
for the stand-ins). What comes back: the steps verl reached (validate_config, the tokenizer, the
reward manager, the RL datasets, the sampler, the trainer), where it stopped, the exception it
raised (its message and the file:line inside verl), and what it did silently (rows dropped by its
filter, prompts over ``data.max_prompt_length``, batches per epoch, total steps).

:func:`classify` gives an exception of verl's start-up a kind and the smallest fix; :func:`compare`
sets the rules' findings beside verl's verdict (a rule that fails a launch verl accepts, or a
launch verl rejects that no rule fails, is a disagreement: a bug in one of the two).
"""

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .startup_releases import RELEASES

__all__ = ["Startup", "lookup_rows", "run_startup", "run_startup_batch", "parse_events", "classify", "compare", "beyond_startup",
           "silent_rows",
           "ignored_rows", "where"]


@dataclass
class Startup:
    """What verl's dry start-up did for one launch.

    Attributes:
        ran: the script reached verl (False: no verl in the target, or the process died).
        verl_version: the installed release.
        stopped_at: the stop point reached (``ResourcePoolManager.create_resource_pool``,
            ``ray.init``...), None when verl raised first.
        where: ``{file, line, function}`` of the verl code that made that call.
        error: ``{step, kind, message, file, line, function, verl_frame, frames}`` when verl raised.
        steps: verl's functions that completed, in order (``validate_config``, ``create_rl_dataset``...).
        facts: silent effects (``train_rows``, ``train_file_rows``, ``train_rows_dropped``,
            ``train_batches``, ``total_training_steps``, ``workers``, ``tokenizer``...).
        items: the dataset's ``__getitem__`` on the first rows (``ok`` or the error).
        lengths: ``{counted, over_limit, longest, max_prompt_length}``: prompts in tokens.
        reward: ``{function, rows: [{data_source, ok, score | kind, message}]}``.
        seconds: wall time of the target process (s); import_seconds: verl's import (s).
        probe: how the process ended (:meth:`ProbeOutput.evidence`) when it did not end cleanly.
        no_verl: why verl could not be run (absent).
        release_spec: the first release of the :data:`RELEASES` entry the target used.
        ignored: ``{keys: [{override, name, parent, closest}], checked, files, seconds}``: the
            user's override keys whose name no source file of the installed verl reads (``{error}``
            when the search failed; None when it did not run).
        lookups: ``[{keys, values, function, when, choices, ok, error}]``: verl's own lookups of
            values it makes only after Ray starts (``lookups`` of :data:`RELEASES`), called once
            the stop point was reached.
    """

    ran: bool = False
    verl_version: Optional[str] = None
    stopped_at: Optional[str] = None
    where: Optional[Dict[str, Any]] = None
    error: Optional[Dict[str, Any]] = None
    steps: List[str] = field(default_factory=list)
    facts: Dict[str, Any] = field(default_factory=dict)
    items: List[Dict[str, Any]] = field(default_factory=list)
    lengths: Optional[Dict[str, Any]] = None
    reward: Optional[Dict[str, Any]] = None
    seconds: float = 0.0
    import_seconds: Optional[float] = None
    probe: Dict[str, Any] = field(default_factory=dict)
    no_verl: Optional[str] = None
    release_spec: Optional[str] = None
    ignored: Optional[Dict[str, Any]] = None
    lookups: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        """verl reached its stop point without raising."""
        return self.ran and self.error is None and self.stopped_at is not None

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready evidence (frames kept to the last few)."""
        return {"verl_version": self.verl_version, "stopped_at": self.stopped_at, "where": self.where,
                "error": self.error, "steps": self.steps, "facts": self.facts, "items": self.items,
                "lengths": self.lengths, "reward": self.reward, "seconds": round(self.seconds, 2),
                "import_seconds": self.import_seconds, "release_spec": self.release_spec, "ignored": self.ignored,
                "lookups": self.lookups}


#: Rows the dry start-up reads of the user's data: reward calls, ``__getitem__`` calls, prompts counted.
FULL_ROWS = {"score_rows": 4, "item_rows": 2, "length_rows": 256}
#: The same for a sweep of many launches (differential, examples): enough to exercise each path.
SWEEP_ROWS = {"score_rows": 2, "item_rows": 1, "length_rows": 32}


def run_startup(python: str, overrides: Sequence[str], config_name: str = "ppo_trainer",
                config_dir: Optional[str] = None, entry: Optional[str] = None, timeout: float = 120.0,
                env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None) -> Startup:
    """verl's dry start-up of a launch under the target interpreter ``python`` within ``timeout`` s.

    ``overrides``: the Hydra override texts as the user wrote them; ``entry``: the entry module
    (default: the installed release's own, :data:`preflight.launch.startup_releases.RELEASES`);
    ``env``: the launch's own environment assignments; ``cwd``: the job's working directory, where
    verl resolves the launch's relative paths (the target script changes into it after taking it
    off ``sys.path``).
    Never raises for the child: a crash or timeout is in :attr:`Startup.probe`.
    """
    from ..probes.process import run_script

    args = dict(FULL_ROWS, entry=entry, config_name=config_name or "ppo_trainer", releases=_releases(),
                config_dir=config_dir, overrides=list(overrides), job_cwd=cwd)
    out = run_script(python, "verl_startup", args, timeout=timeout, env=env)
    st = parse_events(out.events)
    st.seconds = out.duration_s
    if out.returncode != 0 or out.timed_out or (not st.ran and st.no_verl is None):
        st.probe = out.evidence()
    return st


def _releases() -> List[List[Any]]:
    return [[first, spec] for first, spec in RELEASES]


def run_startup_batch(python: str, cases: Sequence[Sequence[str]], config_name: str = "ppo_trainer",
                      entry: Optional[str] = None, timeout: float = 600.0, config_dir: Optional[str] = None,
                      env: Optional[Dict[str, str]] = None, rows: Optional[Dict[str, int]] = None,
                      cwd: Optional[str] = None) -> List[Startup]:
    """verl's dry start-up of several launches (override lists) in one target process (verl imported
    once); one :class:`Startup` per case, in order (a case the process never reached has ran=False,
    unless verl's import failed: then every case carries that error). ``config_dir``, ``env``: as
    for :func:`run_startup`, shared by every case; ``rows``: how much of the data each case reads
    (:data:`SWEEP_ROWS` by default, :data:`FULL_ROWS` for a user's launch). Each case's
    ``seconds`` is the whole process's wall time (s)."""
    from ..probes.process import run_script

    args = dict(rows or SWEEP_ROWS, entry=entry, config_name=config_name or "ppo_trainer", config_dir=config_dir,
                releases=_releases(), overrides=[], batch=[list(c) for c in cases], job_cwd=cwd)
    out = run_script(python, "verl_startup", args, timeout=timeout, env=env)
    head: List[Dict[str, Any]] = []
    per: List[List[Dict[str, Any]]] = []
    for e in out.events:
        if e.get("event") == "case":
            per.append([])
        elif per:
            per[-1].append(e)
        else:
            head.append(e)
    res = []
    for i in range(len(cases)):
        # a case the process never reached: what the shared part said (verl's import failed, for
        # every case alike), else how the process ended
        st = parse_events(head + per[i]) if i < len(per) else parse_events(head)
        if i >= len(per) and st.error is None:
            st = Startup()
            st.probe = out.evidence()
        elif out.returncode != 0 or out.timed_out:
            st.probe = out.evidence()
        st.seconds = out.duration_s
        res.append(st)
    return res


def parse_events(events: Sequence[Dict[str, Any]]) -> Startup:
    """A :class:`Startup` from the target script's events (see preflight/target/verl_startup.py)."""
    st = Startup()
    for e in events:
        kind = e.get("event")
        if kind == "no_verl":
            st.no_verl = e.get("reason")
        elif kind == "env":
            st.ran = True
            st.verl_version = e.get("verl_version")
            st.import_seconds = e.get("import_seconds")
            st.release_spec = e.get("release_spec")
        elif kind == "step" and e.get("state") == "ok":
            st.steps.append(str(e.get("name")))
        elif kind == "stopped":
            st.stopped_at, st.where = e.get("at"), e.get("where")
        elif kind == "error":
            st.ran = True
            st.error = {k: v for k, v in e.items() if k != "event"}
        elif kind == "facts":
            st.facts = {k: v for k, v in e.items() if k != "event"}
        elif kind == "item":
            st.items.append({k: v for k, v in e.items() if k != "event"})
        elif kind == "lengths":
            st.lengths = {k: v for k, v in e.items() if k != "event"}
        elif kind == "reward":
            st.reward = {k: v for k, v in e.items() if k != "event"}
        elif kind == "ignored":
            st.ignored = {k: v for k, v in e.items() if k != "event"}
        elif kind == "lookup":
            st.lookups.append({k: v for k, v in e.items() if k != "event"})
    return st


def lookup_rows(st: Startup) -> List[Tuple[str, str, str, Optional[str]]]:
    """(item ``lookup.<key>``, status, message, fix) for each of verl's own lookups the dry start-up
    called after its stop point: FAIL quoting verl's refusal and file:line with the registry's
    names, else one PASS naming what was looked up. [] when none ran."""
    out: List[Tuple[str, str, str, Optional[str]]] = []
    for lk in st.lookups:
        if lk.get("ok"):
            continue
        err = lk.get("error") or {}
        keys, values = lk.get("keys") or [], lk.get("values") or []
        choices = lk.get("choices") or []
        out.append(("lookup.%s" % (keys[0] if keys else "?"), "fail", "verl %s refuses %s: %s: %s (%s); the job stops there at %s, after Ray and "
                    "the models have started" % (
                        st.verl_version, " ".join("%s=%s" % kv for kv in zip(keys, values)), err.get("kind"),
                        first_line(err.get("message"), 300), where(err), lk.get("when")),
                    "set %s to one of verl %s's: %s" % (" and ".join(keys), st.verl_version, ", ".join(choices))
                    if choices else "use a value verl %s registers" % st.verl_version))
    good = [lk for lk in st.lookups if lk.get("ok")]
    if good and not out:
        out.append(("lookup", "pass", "verl %s's own lookups accept %s" % (st.verl_version, ", ".join(
            " ".join("%s=%s" % kv for kv in zip(lk.get("keys") or [], lk.get("values") or [])) for lk in good)),
            None))
    return out


# ---- classification -----------------------------------------------------------------------------
_FULL_KEY = re.compile(r"full_key:\s*([\w.]+)")
_REPO_ID = re.compile(r"Repo id must be in the form[^:]*:\s*'([^']+)'")
_NOT_CACHED = re.compile(r"(?:not find|couldn't connect|offline mode|cannot find the requested files|"
                         r"local_files_only|is not a local folder)", re.I)
_NO_MODULE = re.compile(r"No module named '([^']+)'")
_NO_NAME = re.compile(r"cannot import name '([^']+)' from '([\w.]+)'")
_MISSING_VAL = re.compile(r"Missing mandatory value:\s*([\w.]+)")
_NOT_INSTALLED = re.compile(r"\b(vllm|sglang) version None not supported", re.I)
_FILE_NOT_FOUND = re.compile(r"(?:No such file or directory|FileNotFoundError)[^']*'([^']+)'")


def classify(err: Dict[str, Any]) -> Tuple[str, str]:
    """(kind, smallest fix) for an exception verl's start-up raised (an ``error`` dict of
    :class:`Startup`). Kinds: ``compose`` (Hydra refused the overrides), ``model_path``, ``hub_not_cached``, ``missing_module``,
    ``incompatible_package``, ``missing_value``, ``data_file``, ``dataset``, ``reward``, ``validate_config``, ``config_value``."""
    msg = str(err.get("message") or "")
    step = str(err.get("step") or "")
    if step == "compose":
        return "compose", "Hydra refuses the overrides before verl runs: change the override it names (a key this " \
                          "verl release's config lacks takes '+', a value with shell characters takes quotes)"
    key = _FULL_KEY.search(msg)
    m = _REPO_ID.search(msg)
    if m:
        node = key.group(1) if key else "actor_rollout_ref.model"
        return "model_path", "set %s.path to a local model directory (%r is neither a directory here nor a hub " \
                             "id)" % (node, m.group(1))
    if _NOT_CACHED.search(msg) and ("tokenizer" in step or "omega_conf_to_dataclass" in step or "model" in msg.lower()):
        return "hub_not_cached", "download the model once (huggingface-cli download <id>) or point " \
                                 "actor_rollout_ref.model.path at a local directory: the dry start-up never " \
                                 "downloads (HF_HUB_OFFLINE=1)"
    m = _NO_NAME.search(msg)
    if m:
        return "incompatible_package", "install a %s release that still has %s (verl imports it at %s; the installed " \
            "%s is newer or older than the one this verl release was built with)" % (m.group(2), m.group(1),
                                                                                    where(err), m.group(2))
    m = _NOT_INSTALLED.search(msg)
    if m:  # verl.third_party.vllm: "vllm version None not supported and SGLang also not Found"
        return "missing_module", "install %s in the target environment (verl imports it at %s: the launch's " \
            "rollout needs it; a LoRA launch loads verl.third_party.vllm at start-up)" % (m.group(1).lower(), where(err))
    m = _NO_MODULE.search(msg)
    if m:
        top = m.group(1).split(".")[0]
        pkg = {"megatron": "megatron-core", "sglang": "sglang", "vllm": "vllm", "math_verify": "math-verify",
               "flash_attn": "flash-attn", "pkg_resources": "setuptools<81", "PIL": "pillow"}.get(top, top)
        return "missing_module", "install %s in the target environment (verl imports %s at %s)" % (
            pkg, m.group(1), step or "start-up")
    m = _MISSING_VAL.search(msg)
    if m:
        return "missing_value", "set %s (verl's config marks it mandatory: ???)" % m.group(1)
    m = _FILE_NOT_FOUND.search(msg)
    if m and ("dataset" in step or "data" in msg):
        return "data_file", "point data.train_files / data.val_files at files on this machine (%s is absent)" % \
            m.group(1)
    if "dataset" in step or "getitem" in step:
        return "dataset", "fix the dataset or the data.* option verl names in the message"
    if "reward" in step:
        return "reward", "fix the reward function or its imports (custom_reward_function / reward_manager)"
    if step.endswith("validate_config") or "validate" in str((err.get("verl_frame") or {}).get("function", "")):
        return "validate_config", "change the option verl's validate_config names in the message"
    return "config_value", "change the option verl names in the message"


def where(err: Dict[str, Any]) -> str:
    """``file:line`` inside verl (the deepest verl frame), else the raising frame."""
    vf = err.get("verl_frame") or {}
    if vf.get("file"):
        return "%s:%s" % (vf["file"], vf.get("line"))
    if err.get("file"):
        return "%s:%s" % (err["file"], err.get("line"))
    return "?"


# ---- silent effects ------------------------------------------------------------------------------
def silent_rows(st: Startup) -> List[Tuple[str, str, str, Optional[str]]]:
    """(item, status, message, fix) rows for what verl did without a word: rows its filter dropped,
    prompts over data.max_prompt_length, an epoch of no batch, total steps, reward calls that failed,
    override keys no code of the installed verl reads (``ignored``, also when verl raised)."""
    out: List[Tuple[str, str, str, Optional[str]]] = []
    out += ignored_rows(st)
    f = st.facts
    if not f:
        return out
    for part in ("train", "val"):
        drop = f.get(part + "_rows_dropped")
        if drop:
            out.append(("%s_filtered" % part, "warn", "verl's dataset kept %s of %s %s rows: %d dropped (%s)" % (
                f.get(part + "_rows"), f.get(part + "_file_rows"), part, drop,
                "filter_overlong_prompts=True, prompts over data.max_prompt_length=%s" % f.get("max_prompt_length")
                if f.get("filter_overlong_prompts") else "max_samples or the dataset's own filter"),
                "raise data.max_prompt_length or shorten the prompts, if those rows matter"))
    if f.get("train_batches") == 0:
        out.append(("train_batches", "fail", "the train dataloader has no batch: %s rows, data.train_batch_size "
                    "larger (drop_last)" % f.get("train_rows"), "lower data.train_batch_size below %s" %
                    f.get("train_rows")))
    ln = st.lengths
    if ln and ln.get("over_limit"):
        trunc = f.get("truncation")
        status = "fail" if trunc == "error" and not f.get("filter_overlong_prompts") else "warn"
        what = {"error": "verl raises on them ('Prompt length ... is longer than')", "left": "verl cuts them from "
                "the left", "right": "verl cuts them from the right", "middle": "verl cuts their middle"}.get(
                    str(trunc), "truncation=%s" % trunc)
        if f.get("filter_overlong_prompts"):
            what = "verl's filter drops them"
        out.append(("prompt_length", status, "%d of %d prompts counted are longer than data.max_prompt_length=%s "
                    "tokens with this tokenizer (longest %s): %s" % (ln["over_limit"], ln["counted"],
                                                                       ln.get("max_prompt_length"), ln.get("longest"),
                                                                       what),
                    "set data.max_prompt_length=%s or data.filter_overlong_prompts=True" % ln.get("longest")))
    if f.get("total_training_steps") is not None:
        out.append(("steps", "pass", "%s train batches per epoch, %s total training steps; %s val batch(es)" % (
            f.get("train_batches"), f.get("total_training_steps"), f.get("val_batches")), None))
    return out


def ignored_rows(st: Startup) -> List[Tuple[str, str, str, Optional[str]]]:
    """The ``ignored`` row: (item, status, message, fix), WARN naming the override keys whose name
    appears in no source file of the installed verl (a ``+``-added key Hydra accepted, a misspelt
    or retired option), with the nearest key verl's config has; PASS with the count checked."""
    ig = st.ignored
    if not ig or ig.get("error"):
        return []
    keys = ig.get("keys") or []
    files = ig.get("files")
    if not keys:
        return [("ignored", "pass", "all %d override key(s) are read by verl %s (%s source files searched)" % (
            ig.get("checked", 0), st.verl_version, files), None)]
    msg = "%d override key(s) not read anywhere in verl %s (%s source files searched): %s" % (
        len(keys), st.verl_version, files, ", ".join(
            "%s (%r appears in no file)" % (k.get("override"), k.get("name")) for k in keys))
    fixes = []
    for k in keys:
        close = k.get("closest")
        fixes.append("%s: remove it or check its spelling%s" % (
            k.get("override"), ": verl %s reads %s" % (st.verl_version, close) if close else ""))
    return [("ignored", "warn", msg, "; ".join(fixes))]


# ---- verl against the rules ----------------------------------------------------------------------
def compare(findings: Sequence[Any], st: Startup) -> List[Dict[str, Any]]:
    """Disagreements between the rules' findings and verl's own start-up.

    Returns ``[{"rule", "id", "rules", "verl", "why"}]``: a rule FAIL verl passed through (a
    false positive when the rule says verl stops before Ray, i.e. at a step verl ran), and a verl
    failure that no rule flagged. Rules that speak of later stages (workers, rollout, GPUs) are
    not contradicted by a dry start-up that stops before them.
    """
    out: List[Dict[str, Any]] = []
    if not st.ran:
        return out
    fails = [f for f in findings if getattr(f, "status", None) == "fail"]
    if st.accepted:
        for f in fails:
            stops = str(getattr(f, "stops", "") or "")
            where_ = str(getattr(f, "where", "") or "")
            if _before_ray(stops, where_):
                out.append({"rule": f.rule, "id": f.id, "rules": "fail: " + f.message,
                            "verl": "accepted (stopped at %s)" % st.stopped_at,
                            "why": "the rule says verl stops at %s, before Ray, but verl's own start-up passed it"
                                   % (where_ or stops)})
    elif st.error is not None and not fails:
        kind, _fix = classify(st.error)
        if kind in MACHINE_KINDS:
            return out  # the rules judge the config; a model, file or package this machine lacks is not theirs
        out.append({"rule": None, "id": None, "rules": "no rule fails",
                    "verl": "%s: %s (%s)" % (st.error.get("kind"), first_line(st.error.get("message")), where(st.error)),
                    "why": "verl rejects the launch at %s (%s); no rule covers it" % (st.error.get("step"), kind)})
    return out


#: Kinds of start-up failure that come from this machine (its files, its caches, its packages, the
#: user's own code), not from the config: the rules are not expected to foresee them.
MACHINE_KINDS = frozenset(("model_path", "hub_not_cached", "missing_module", "incompatible_package", "data_file",
                           "dataset", "reward"))

_PRE_RAY = ("validate_config", "main_ppo", "__post_init__", "omega_conf_to_dataclass", "rl_dataset",
            "ray_trainer.py _validate_config", "RayPPOTrainer.__init__", "config/actor.py", "config/critic.py",
            "config/rollout.py", "config/engine.py", "config/model.py", "create_rl_dataset")


def beyond_startup(findings: Sequence[Any]) -> List[str]:
    """The rules that FAIL the launch at a step after verl's dry start-up stops (workers, rollout,
    GPUs): neither confirmed nor contradicted by it. Returns their rule names, in order."""
    return [str(f.rule) for f in findings if getattr(f, "status", None) == "fail" and f.rule != "fix_line"
            and not _before_ray(str(getattr(f, "stops", "") or ""), str(getattr(f, "where", "") or ""))]


def _before_ray(stops: str, where_: str) -> bool:
    text = "%s %s" % (stops, where_)
    if "fsdp_workers" in text or "engine_workers" in text or "megatron_workers" in text or "vllm" in text or \
            "agent_loop" in text:
        return False
    return any(k in text for k in _PRE_RAY)


def first_line(msg: Any, limit: int = 300) -> str:
    """The first line of an exception message, with the next one when it ends in ':' (Hydra's
    InstantiationException puts the cause verl raised on the second line), at most ``limit``
    characters."""
    lines = [x.strip() for x in str(msg or "").strip().splitlines()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return (lines[0] + " " + lines[1])[:limit]
    return lines[0][:limit] if lines else ""
