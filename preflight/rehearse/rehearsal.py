"""One rehearsal from start to end: read the launch, make the small model and the data slices,
rewrite and compose the launch, run it, and turn what happened into report rows.

:func:`rehearse` returns a :class:`Rehearsal` whose ``results`` are the report's rows (stage
``rehearse``): the model, the data, the tokenizer, the composition, the run (with the first real
error, its cause and fix), one row per phase (wall time and peak GPU memory per GPU), the
full-size model's memory needs and the clean-up. Commands (``rehearse``, ``check --rehearse``)
present it.
"""

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..launch.overrides import LaunchSpec
from ..result import Result, Status
from . import dataslice, memory, rewrite, shrink, supervise
from . import phases as phase_mod

__all__ = ["Options", "Rehearsal", "rehearse", "classify_failure", "explain_run", "report_run", "prompt_column_problem", "STAGE"]

STAGE = "rehearse"


@dataclass
class Options:
    """What the user asked for (``preflight rehearse`` options).

    Attributes: ``timeout`` (seconds for the run), ``address`` (join that Ray cluster),
    ``keep_loggers``, ``validate``, ``keep_checkpoints``, ``response_length`` (tokens),
    ``gpus`` (run on this many GPUs of this node: sets trainer.n_gpus_per_node, trainer.nnodes=1
    and caps the rollout's tensor-parallel size), ``keep_workdir`` (leave the private directory),
    ``module`` (entry point; tests use a fake one), ``env`` (HF cache lookup environment),
    ``stall_s`` (seconds a run may go on without progress after a Ray actor died in its creation
    task before it is stopped: verl keeps waiting for such an actor; 0 leaves it to the deadline).
    """

    timeout: float = 900.0
    address: Optional[str] = None
    keep_loggers: bool = False
    validate: bool = False
    keep_checkpoints: bool = False
    response_length: Optional[int] = None
    gpus: Optional[int] = None
    keep_workdir: bool = False
    module: str = "verl.trainer.main_ppo"
    prep_timeout: float = 300.0
    stall_s: float = 90.0


@dataclass
class Rehearsal:
    """The outcome: report ``results``, the ``phases`` table, memory ``needs`` rows, ``model``
    (what was built), ``launch`` (the rewritten overrides and notes), ``run`` facts, ``workdir``
    (None once removed), ``error`` (the first real error as a dict)."""

    results: List[Result] = field(default_factory=list)
    phases: List[phase_mod.Phase] = field(default_factory=list)
    needs: List[Dict[str, Any]] = field(default_factory=list)
    model: Dict[str, Any] = field(default_factory=dict)
    launch: Dict[str, Any] = field(default_factory=dict)
    run: Dict[str, Any] = field(default_factory=dict)
    error: Optional[Dict[str, Any]] = None
    workdir: Optional[str] = None

    def section(self) -> Dict[str, Any]:
        """The JSON report's ``rehearsal`` section."""
        return {"phases": [p.to_dict() for p in self.phases], "memory": self.needs, "model": self.model,
                "launch": self.launch, "run": self.run, "error": self.error, "workdir": self.workdir}


def _row(rid: str, status: Status, message: str, fix: Optional[str] = None, evidence: Optional[Dict[str, Any]] = None,
         duration: float = 0.0, caused_by: Optional[List[str]] = None) -> Result:
    return Result(id="%s.%s" % (STAGE, rid), stage=STAGE, status=status, message=message, evidence=evidence or {},
                  fix=fix, caused_by=caused_by or [], duration_s=duration)


def explain_run(text: str) -> Optional[Any]:
    """The run's output ``text`` (its whole log) read by ``preflight explain``'s classifier
    (:func:`preflight.explain.explain_text`: wrappers and warnings looked past, the first real error
    matched against the ``[[explain]]`` then ``[[signature]]`` rows of matrices/signatures.toml), so
    a rehearsal and ``preflight explain`` of the same output name the same error and cause. Returns
    the Explanation (``root``: the error event or None; ``id`` None when no row names it), or None
    when the classifier itself failed; never raises."""
    from .. import matrix as matrix_mod
    from ..explain import explain_text

    try:
        return explain_text(text, matrix_mod.load())
    except Exception:  # the classifier must never hide the run's own error
        return None


def classify_failure(text: str) -> Optional[Any]:
    """:func:`explain_run` when a row names the error (``id``, ``cause``, ``fix``, ``layer``,
    ``root``), else None."""
    ex = explain_run(text)
    return ex if ex is not None and ex.id else None


#: Phase -> (what failed, the fix), for a first error no signature names.
_PHASE_FIX = {
    "startup": ("verl stopped before Ray started (Hydra or verl's validate_config refused the config, or an "
                "import failed)", "fix the setting or package the error names, then rehearse again"),
    "ray_start": ("Ray did not start", "check that no other Ray instance holds this node's ports and that /tmp is "
                  "writable; rehearse again"),
    "worker_init": ("the FSDP workers failed while loading the model", "fix what the error names in the actor/ref "
                    "settings (actor_rollout_ref.actor.*, .ref.*, .model.*)"),
    "reward_init": ("the reward loop failed to start (the reward function or manager could not be loaded)",
                    "fix the reward module the error names (custom_reward_function.path/name, reward_manager)"),
    "rollout_start": ("the rollout engine (vLLM) failed to start", "fix the rollout setting or variable the error "
                      "names (actor_rollout_ref.rollout.*, VLLM_* variables)"),
    "weight_sync": ("syncing the actor's weights into the rollout failed", "check the rollout's load_format and "
                    "checkpoint engine settings"),
    "rollout": ("the rollout failed on the first batch", "fix what the error names in the data or rollout settings"),
    "reward": ("the reward function raised on real rollout outputs", "make the reward function handle every "
               "response the model can produce (empty, unparsable, truncated), then rehearse again"),
    "log_prob": ("the old/ref log-prob pass failed", "fix what the error names (log_prob micro batch sizes, "
                 "max token lengths)"),
    "actor_update": ("the actor update failed", "fix what the error names (mini/micro batch sizes, loss settings)"),
    "step_sync": ("the weight sync after step 1 failed", "check the rollout's checkpoint engine settings"),
    "step2": ("the second step failed (on the weights the first one synced)", "fix what the error names"),
}


def prompt_column_problem(columns: Dict[str, str], key: str) -> Optional[str]:
    """Why a file with Arrow ``columns`` (name -> type string) cannot feed verl's RLHFDataset
    through ``data.prompt_key`` ``key``, or None. verl applies the tokenizer's chat template to the
    column's value, a list of ``{role, content}`` messages; on the H200 (verl 0.9.1), a string column
    had every row dropped (filter_overlong_prompts) and the trainer stopped with ZeroDivisionError
    before step 1."""
    if key not in columns:
        return "no column %r (data.prompt_key); columns: %s" % (key, ", ".join(sorted(columns)))
    t = columns[key]
    if not t.startswith(("list<", "large_list<")) or "struct<" not in t or "content" not in t or "role" not in t:
        return ("column %r is %s, not a list of {role, content} chat messages: verl's RLHFDataset drops or fails "
                "every row (verl 0.9.1 then stops with ZeroDivisionError before step 1)" % (key, t))
    return None


def _failed_phase(table: List[phase_mod.Phase]) -> Optional[phase_mod.Phase]:
    started = [p for p in table if p.window is not None]
    for p in started:
        if not p.reached:
            return p
    reached = [p for p in table if p.reached]
    if not reached:
        return table[0] if table else None
    idx = [p.id for p in table].index(reached[-1].id)
    return table[idx + 1] if idx + 1 < len(table) else reached[-1]


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _settings(comp: Any) -> Dict[str, Any]:
    g = comp.get
    adv = str(g("algorithm.adv_estimator", "gae"))
    return {
        "model_path": g("actor_rollout_ref.model.path"),
        "train_files": dataslice.as_list(g("data.train_files")),
        "val_files": dataslice.as_list(g("data.val_files")),
        "train_batch_size": _int(g("data.train_batch_size"), 1),
        "val_batch_size": g("data.val_batch_size"),
        "prompt_key": g("data.prompt_key", "prompt") or "prompt",
        "prompt_length": _int(g("data.max_prompt_length"), 512),
        "response_length": _int(g("data.max_response_length"), 512),
        "rollout_n": _int(g("actor_rollout_ref.rollout.n"), 1),
        "rollout_tp": _int(g("actor_rollout_ref.rollout.tensor_model_parallel_size"), 1),
        "ep": _int(g("actor_rollout_ref.rollout.expert_parallel_size"), 1),
        "pp": max(_int(g("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"), 1),
                  _int(g("actor_rollout_ref.rollout.pipeline_model_parallel_size"), 1)),
        "gpus_per_node": _int(g("trainer.n_gpus_per_node"), 1),
        "nnodes": _int(g("trainer.nnodes"), 1),
        "gpu_memory_utilization": g("actor_rollout_ref.rollout.gpu_memory_utilization"),
        "micro_batch": _int(g("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"), 1),
        "param_offload": bool(g("actor_rollout_ref.actor.fsdp_config.param_offload", False)),
        "optimizer_offload": bool(g("actor_rollout_ref.actor.fsdp_config.optimizer_offload", False)),
        "grad_ckpt": bool(g("actor_rollout_ref.model.enable_gradient_checkpointing", True)),
        "ref": bool(g("actor_rollout_ref.actor.use_kl_loss", False)) or bool(g("algorithm.use_kl_in_reward", False)),
        "critic": adv == "gae",
        "trust_remote_code": bool(g("actor_rollout_ref.model.trust_remote_code", False)),
        "tokenizer_path": g("actor_rollout_ref.model.tokenizer_path"),
    }


def _make_model(python: str, s: Dict[str, Any], work: str, corpus: List[Any], opts: Options,
                tp: int, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    from ..launch.model import find_config
    from ..probes.process import run_script

    path, how = find_config(s["model_path"])
    info: Dict[str, Any] = {"user_model": s["model_path"], "found": how}
    full: Dict[str, Any]
    if path:
        full = shrink.read_config(path)
        info["config"] = path
    else:
        full = shrink.fallback_config()
        info["fallback"] = shrink.FALLBACK_NAME
    small, notes = shrink.shrink_config(full, pipeline_size=s["pp"], tensor_size=tp, expert_size=s["ep"])
    mdir = os.path.join(work, "model")
    os.mkdir(mdir, 0o700)  # in the run's mkdtemp directory
    from ..atomic import write_new

    write_new(os.path.join(mdir, "config.json"), json.dumps(small, indent=1, sort_keys=True))
    tok_src = s.get("tokenizer_path") or (os.path.dirname(path) if path else None)
    if tok_src and os.path.isdir(os.path.expanduser(str(tok_src))):
        info["tokenizer_files"] = shrink.copy_tokenizer(os.path.expanduser(str(tok_src)), mdir)
    prompts = [p for p in corpus if p is not None][:8]
    texts: List[Any] = []
    for p in corpus:
        if isinstance(p, list):
            texts.extend(str(m.get("content", "")) for m in p if isinstance(m, dict))
        elif p is not None:
            texts.append(str(p))
    out = run_script(python, "rehearse_model", {
        "out_dir": mdir, "seed": 0, "trust_remote_code": s["trust_remote_code"], "full_config": full,
        "corpus": texts[:2000], "probe_texts": prompts, "chat": True,
        "vllm_env": sorted(n for n in set(os.environ) | set(env or {}) if n.startswith("VLLM_"))},
        timeout=opts.prep_timeout)
    info["vllm_env"] = out.last("vllm_env")
    info.update({"dir": mdir, "notes": notes, "model_type": small.get("model_type"), "small_config": small,
                 "seconds": round(out.duration_s, 2)})
    info["built"] = out.last("model")
    info["full"] = out.last("full")
    info["tokenizer"] = out.last("tokenizer")
    info["probe"] = None if out.last("model") else out.evidence()
    err = out.last("error")
    if err:
        info["error"] = err
    info["vocab_size"] = (small.get("text_config") or small).get("vocab_size")
    return info


def rehearse(python: str, spec: LaunchSpec, comp: Any, release: Optional[str], opts: Options,
             gpu_total_gib: Optional[float] = None) -> Rehearsal:
    """Rehearse ``spec`` (its composed config ``comp``, :func:`launch.compose.compose`) under the
    target ``python`` for verl ``release``. Never raises for the user's launch; a
    KeyboardInterrupt stops the run (everything it started ended) and propagates."""
    rh = Rehearsal()
    s = _settings(comp)
    work = tempfile.mkdtemp(prefix="preflight-rehearse-")
    rh.workdir = work
    ray_dir = None if opts.address else supervise.ray_temp_dir()
    try:
        _rehearse(rh, python, spec, comp, release, opts, s, work, ray_dir, gpu_total_gib)
    finally:
        if ray_dir:
            shutil.rmtree(ray_dir, ignore_errors=True)
        if not opts.keep_workdir:
            shutil.rmtree(work, ignore_errors=True)
            rh.workdir = None
    return rh


def _rehearse(rh: Rehearsal, python: str, spec: LaunchSpec, comp: Any, release: Optional[str], opts: Options,
              s: Dict[str, Any], work: str, ray_dir: Optional[str], gpu_total_gib: Optional[float]) -> None:
    from ..probes.process import run_script

    from ..launch.code import launch_code_refusal
    from ..paths import CODE_FIX

    refused = launch_code_refusal(comp)
    if refused:  # the rehearsal would import it (verl, transformers) as this user
        rh.results.append(_row("launch", Status.FAIL, "the rehearsal %s" % refused, CODE_FIX))
        return
    t0 = time.time()
    gpus = opts.gpus
    tp = s["rollout_tp"] if not gpus else min(s["rollout_tp"], gpus)
    extra: Dict[str, Any] = {}
    if gpus:
        extra.update({"trainer.n_gpus_per_node": gpus, "trainer.nnodes": 1})
        if tp != s["rollout_tp"]:
            extra["actor_rollout_ref.rollout.tensor_model_parallel_size"] = tp
    elif s["nnodes"] > 1 and not opts.address:
        rh.results.append(_row("launch", Status.FAIL, "the launch asks for trainer.nnodes=%d; a private rehearsal runs "
                               "on this node only" % s["nnodes"], "pass --gpus N to rehearse on N GPUs of this node, "
                               "or --address HOST:PORT to join the cluster"))
        return
    # data
    train_rows = dataslice.rows_needed(s["train_batch_size"])
    val_rows = _int(s["val_batch_size"], 0) or s["train_batch_size"]
    plan = dataslice.plan_slices(s["train_files"], s["val_files"], work, train_rows, val_rows)
    if plan["problems"] or not plan["train"]:
        msg = "; ".join(plan["problems"]) or "data.train_files is not set"
        rh.results.append(_row("data", Status.FAIL, msg, "point data.train_files/data.val_files at parquet files on "
                               "this machine"))
        return
    os.mkdir(os.path.join(work, "data"), 0o700)  # in the run's mkdtemp directory
    out = run_script(python, "rehearse_data", {"files": plan["files"], "prompt_key": s["prompt_key"], "sample": 64},
                     timeout=opts.prep_timeout)
    slices = [e for e in out.events if e.get("event") == "slice"]
    bad = [e for e in slices if e.get("error")]
    if out.last("no_pyarrow") or bad or len(slices) != len(plan["files"]):
        why = (out.last("no_pyarrow") or {}).get("error") or "; ".join(
            "%s: %s" % (e["src"], e["error"]) for e in bad) or out.describe()
        rh.results.append(_row("data", Status.FAIL, "the data could not be sliced: %s" % why,
                               "make the files readable by the target's pyarrow (verl reads them with it)"))
        return
    short = [e for e in slices if e["dest"] in plan["train"] and e["rows"] < s["train_batch_size"]]
    rh.results.append(_row("data", Status.WARN if short else Status.PASS, "%d file(s) sliced: %s" % (
        len(slices), ", ".join("%s %d of %d rows" % (os.path.basename(e["src"]), e["rows"], e["total_rows"])
                               for e in slices)),
        "give data.train_files at least data.train_batch_size=%d rows" % s["train_batch_size"] if short else None,
        {"slices": [{k: e.get(k) for k in ("src", "rows", "total_rows", "columns", "format")} for e in slices],
         "rows_per_train_file": train_rows}))
    for e in slices:
        if e["dest"] not in plan["train"] + plan["val"] or not e.get("columns"):
            continue
        kind = prompt_column_problem(e["columns"], s["prompt_key"])
        if kind:
            rh.results.append(_row("data.columns", Status.FAIL, "%s: %s" % (e["src"], kind),
                                   "write data.prompt_key (%s) as a list of {role, content} chat messages, as verl's "
                                   "examples/data_preprocess scripts do" % s["prompt_key"],
                                   {"columns": e["columns"], "prompt_key": s["prompt_key"]}))
            return
    corpus: List[Any] = []
    for e in slices:
        corpus.extend(e.get("prompts") or [])
    # model
    info = _make_model(python, s, work, corpus, opts, tp, env=spec.env)
    _vllm_env_row(rh, info, spec)
    rh.model = {k: v for k, v in info.items() if k not in ("small_config",)}
    built, tok = info.get("built"), info.get("tokenizer") or {}
    if not built:
        err = info.get("error") or {}
        rh.results.append(_row("model", Status.FAIL, "the small %s model could not be built: %s" % (
            info.get("model_type"), err.get("message") or (info.get("probe") or {}).get("stderr_tail", "")[-300:]),
            "check the target's transformers supports model_type %s (the launch's own model loads through it too)" %
            info.get("model_type"), {"traceback": err.get("traceback")}))
        return
    same = None
    if info.get("full"):
        same = sorted(built["patterns"]) == sorted(info["full"]["patterns"])
    fb = info.get("fallback")
    rh.results.append(_row(
        "model", Status.WARN if fb else Status.PASS,
        "%s, %.1fM random parameters (%s; %s)" % (
            built.get("cls"), built.get("params", 0) / 1e6,
            ("fallback architecture %s: %s" % (fb, info["found"])) if fb else "from %s" % info.get("config"),
            "same module tree as the full-size model" if same else "module tree compared: %s" % same),
        "make the model's config.json reachable here (a local directory or the Hugging Face cache) to rehearse "
        "its own architecture" if fb else None,
        {"notes": info.get("notes"), "full_params": (info.get("full") or {}).get("params"),
         "same_module_tree": same, "seconds": info.get("seconds")}))
    if not _tokenizer_rows(rh, info, tok):
        return
    # launch
    model_keys = ["actor_rollout_ref.model.path"] + (["critic.model.path"] if s["critic"] else [])
    if s.get("tokenizer_path"):
        model_keys.append("actor_rollout_ref.model.tokenizer_path")
    rw = rewrite.rewrite(spec, info["dir"], plan["train"], plan["val"], work, response_length=opts.response_length,
                         user_response_length=s["response_length"], validate=opts.validate,
                         keep_loggers=opts.keep_loggers, keep_checkpoints=opts.keep_checkpoints,
                         ray_address=opts.address, ray_temp_dir=ray_dir, extra=extra, model_keys=model_keys)
    rh.launch = {"overrides": rw.overrides, "replaced": rw.replaced, "notes": rw.notes, "env": sorted(rw.env)}
    try:
        _comp2, refusal = rewrite.verify(spec, rw, release)
    except Exception as exc:  # no stored tree for this release: the run itself will compose
        refusal = None
        rh.launch["compose_note"] = "not composed here (%s); verl composes it" % exc
    if refusal:
        rh.results.append(_row("compose", Status.FAIL, "the rewritten launch does not compose: %s" % refusal,
                               "report it: the rehearsal's own overrides must compose for every release",
                               {"overrides": rw.overrides}))
        return
    rh.results.append(_row("compose", Status.PASS, "%d overrides (%d of the launch kept, %d replaced) compose with "
                           "Hydra for verl %s" % (len(rw.overrides), len(rw.overrides) - len(rw.settings),
                                                  len(rw.replaced), release or "?"),
                           evidence={"notes": rw.notes, "replaced": rw.replaced}))
    # run
    res = supervise.run(python, rw.overrides, work, opts.timeout, env=rw.env, module=opts.module,
                        ray_dir=None, keep_ray_address=bool(opts.address), stall_s=opts.stall_s or None)
    table = phase_mod.phase_table(res.lines, res.gpu, ended_at=res.seconds)
    rh.phases = table
    rh.run = {"returncode": res.returncode, "timed_out": res.timed_out, "stalled": res.stalled,
              "seconds": round(res.seconds, 2),
              "gpu_sampling": res.gpu_how, "lines": len(res.lines), "leftovers": res.leftovers}
    failed_at = report_run(rh, res, table, opts)
    _phase_rows(rh, res, table, failed_at)
    world = (gpus or s["gpus_per_node"]) * (1 if gpus else s["nnodes"])
    _memory_row(rh, info, table, world, gpu_total_gib, dict(s, rollout_tp=tp))
    _cleanup_row(rh, res)
    rh.run["prep_s"] = round(time.time() - t0 - res.seconds, 2)


def _memory_row(rh: Rehearsal, info: Dict[str, Any], table: List[phase_mod.Phase], world: int,
                gpu_total_gib: Optional[float], s: Dict[str, Any]) -> None:
    """The ``memory`` row: the full-size model's per-GPU need (GiB) at world size ``world``, from its
    config (or the fallback architecture's), the rollout's measured peak where sampled (``table``)."""
    full_cfg = None
    if info.get("config"):
        try:
            full_cfg = shrink.read_config(info["config"])
        except ValueError:
            full_cfg = None
    full_cfg = full_cfg or shrink.fallback_config()
    roll = next((p for p in table if p.id == "rollout"), None)
    measured = max(roll.peak_mib.values()) / 1024.0 if roll and roll.peak_mib else None
    rh.needs = memory.needs(full_cfg, world, gpu_total_gib, s, measured)
    if not rh.needs:
        return
    train = sum(r["gib"] or 0.0 for r in rh.needs if r["phase"] == "actor update")
    over = gpu_total_gib is not None and train > gpu_total_gib
    rh.results.append(_row("memory", Status.WARN if over else Status.PASS,
                           "full-size model per GPU: actor update about %.1f GiB (parameters, gradients, "
                           "optimizer state, activations; estimated)%s" % (
                               train, "; over the GPU's %.0f GiB" % gpu_total_gib if over else ""),
                           "offload (actor_rollout_ref.actor.fsdp_config.param_offload/optimizer_offload=True), "
                           "smaller micro batches, or more GPUs" if over else None, {"rows": rh.needs}))


def _cleanup_row(rh: Rehearsal, res: supervise.RunOutcome) -> None:
    """The ``cleanup`` row: a WARN naming the run's processes that outlived it (killed), else PASS."""
    if res.leftovers:
        rh.results.append(_row("cleanup", Status.WARN, "%d process(es) of the run outlived it and were killed: %s" % (
            len(res.leftovers), ", ".join(str(p["pid"]) for p in res.leftovers)),
            "report it (the supervisor should have ended them)", {"leftovers": res.leftovers}))
    else:
        rh.results.append(_row("cleanup", Status.PASS, "no process of the run is left (private Ray head stopped, "
                               "temporary files removed)"))


def report_run(rh: Rehearsal, res: supervise.RunOutcome, table: List[phase_mod.Phase], opts: Options
                ) -> Optional[phase_mod.Phase]:
    """Append the ``run`` row to ``rh.results`` for the outcome ``res`` and its phase ``table``: PASS
    for two steps, else FAIL with the first real error (its phase, where, the actor), the cause and
    fix from :func:`explain_run` (the phase's own when no row names it). Sets ``rh.error``;
    returns the failed phase (None on success)."""
    steps = phase_mod.parse_steps(res.lines)
    passed = res.ok and len(steps) >= 2
    err: Optional[phase_mod.ErrorFound] = None
    diag: Optional[Any] = None
    failed_at: Optional[phase_mod.Phase] = None
    if not passed:
        ex = explain_run("\n".join(t for _, t in res.lines))
        diag = ex if ex is not None and ex.id else None
        # the error reported is the one explain's reader takes as the root (classified or not); the
        # parser gives its time, actor and the user's frame, and finds one itself when explain has none
        root = ex.root if ex is not None and ex.root is not None and ex.root.kind == "exception" else None
        err = (phase_mod.first_error(res.lines, headline=root.headline) if root is not None else None) or \
            phase_mod.first_error(res.lines)
        failed_at = (phase_mod.phase_at(table, err.at) if err else None) or _failed_phase(table)
    if passed:
        rh.results.append(_row("run", Status.PASS, "2 training steps ran in %.1f s (verl exited 0)" % res.seconds,
                               duration=res.seconds, evidence={"steps": {str(k): v["metrics"] for k, v in steps.items()}}))
    else:
        pid = failed_at.id if failed_at else "startup"
        if err is not None and err.actor and err.actor.startswith("RewardLoop"):
            pid = "reward"
        where = dict(phase_mod.PHASES).get(pid, pid)
        cause, fix = _PHASE_FIX.get(pid, _PHASE_FIX["startup"])
        if diag is not None:
            cause, fix = diag.cause, diag.fix
        said = err.line if err else "exit status %s" % res.returncode
        if err is not None and err.where:
            said += " (at %s%s)" % (err.where, ", in %s" % err.actor if err.actor else "")
        elif err is not None and err.actor:
            said += " (in %s)" % err.actor
        if res.stalled is not None:
            msg = "verl did not stop after %s (a Ray actor died in its creation task at %.0f s, during %s); " \
                  "stopped after %.0f s without progress" % (said, res.stalled[0], where, opts.stall_s)
        elif res.timed_out and err is not None:
            msg = "verl did not stop after %s at %.0f s during %s; stopped at the %.0f s deadline" % (
                said, err.at, where, opts.timeout)
        elif res.timed_out:
            msg = "stopped at the %.0f s deadline during %s" % (opts.timeout, where)
            fix = "raise --timeout if %s is only slow; else %s" % (where, fix)
        elif res.ok:
            msg = "verl exited 0 after %d step(s), not 2" % len(steps)
        else:
            msg = "failed during %s: %s" % (where, said)
        ev: Dict[str, Any] = {"cause": cause, "phase": pid, "returncode": res.returncode, "probe": res.probe,
                              "classified_as": diag.id if diag else None,
                              "classified_line": diag.root.headline if diag and diag.root else None}
        if err is not None:
            rh.error = {"type": err.type, "message": err.message, "tail": err.tail, "at_s": round(err.at, 2),
                        "actor": err.actor, "where": err.where, "phase": pid, "cause": cause, "fix": fix,
                        "classified_as": diag.id if diag else None}
            ev["traceback_tail"] = err.tail
        else:
            ev["output_tail"] = "\n".join(t for _, t in res.lines[-15:])
        rh.results.append(_row("run", Status.FAIL, "%s (%s)" % (msg, cause), fix, ev, duration=res.seconds))
    return failed_at


def _phase_rows(rh: Rehearsal, res: supervise.RunOutcome, table: List[phase_mod.Phase],
                failed_at: Optional[phase_mod.Phase]) -> None:
    """One row per phase: PASS reached, FAIL where the run failed, SKIP not reached."""
    failed_id = failed_at.id if (failed_at and not res.ok) else None
    for p in table:
        peak = ", ".join("GPU%d %d MiB" % (i, m) for i, m in sorted(p.peak_mib.items())) or "no GPU samples"
        if p.reached:
            rh.results.append(_row("phase.%s" % p.id, Status.PASS, "%s: %.1f s; peak %s" % (p.label, p.seconds or 0.0,
                                                                                           peak),
                                   evidence=p.to_dict(), duration=p.seconds or 0.0))
        elif p.id == failed_id:
            rh.results.append(_row("phase.%s" % p.id, Status.FAIL, "%s: failed after %.1f s; peak %s" % (
                p.label, p.seconds or 0.0, peak), "see %s.run" % STAGE, p.to_dict(), duration=p.seconds or 0.0,
                caused_by=["%s.run" % STAGE]))
        else:
            rh.results.append(_row("phase.%s" % p.id, Status.SKIP, "%s: not reached" % p.label, evidence=p.to_dict(),
                                   caused_by=["%s.run" % STAGE] if not res.ok else []))


def _tokenizer_rows(rh: Rehearsal, info: Dict[str, Any], tok: Dict[str, Any]) -> bool:
    """The tokenizer row; False when its vocabulary does not fit the model (the run would fail)."""
    vocab = info.get("vocab_size")
    if tok:
        if isinstance(vocab, int) and tok.get("max_id", -1) >= vocab:
            rh.results.append(_row("tokenizer", Status.FAIL, "the tokenizer's vocabulary does not fit the model: the "
                                   "data's prompts hold token id %d, the model's vocab_size is %d (len(tokenizer)=%d)"
                                   % (tok["max_id"], vocab, tok.get("size", 0)),
                                   "use the tokenizer that belongs to actor_rollout_ref.model.path (or a model whose "
                                   "vocab_size covers it): ids past the embedding fail in the rollout and the actor",
                                   {"tokenizer": tok, "vocab_size": vocab}))
            return False
        warn = isinstance(vocab, int) and tok.get("size", 0) > vocab
        rh.results.append(_row("tokenizer", Status.WARN if warn else Status.PASS, "%s, %d tokens%s; largest id in the "
                               "first prompts %d < vocab_size %s" % (tok.get("cls"), tok.get("size", 0),
                                                                       " (made here: no tokenizer files)" if tok.get("made") else "",
                                                                       tok.get("max_id", -1), vocab),
                               "check that the tokenizer belongs to the model: it has more tokens than the "
                               "embedding" if warn else None, {"tokenizer": tok}))
    return True


def _vllm_env_row(rh: Rehearsal, info: Dict[str, Any], spec: LaunchSpec) -> None:
    """A WARN row for VLLM_* variables the installed vLLM does not read (they change nothing)."""
    venv = info.get("vllm_env") or {}
    if venv.get("unknown"):
        names = venv["unknown"]
        rh.results.append(_row("vllm_env", Status.WARN, "%s set, but the installed vLLM %s does not read %s (not in "
                               "its envs.py): the setting has no effect" % (
                                   ", ".join("%s=%s" % (n, (spec.env.get(n) or os.environ.get(n, ""))[:40]) for n in names),
                                   venv.get("version") or "?", "it" if len(names) == 1 else "them"),
                               "unset %s; for the attention backend use "
                               "+actor_rollout_ref.rollout.engine_kwargs.vllm.attention_backend=NAME" % " ".join(names),
                               {"vllm_env": venv}))
