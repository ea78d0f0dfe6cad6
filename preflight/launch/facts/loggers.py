"""trainer.logger back-ends and what each finds in a non-interactive job.

verl's Tracking (verl/utils/tracking.py) starts each back-end in the driver's TaskRunner, a Ray
actor without a terminal: wandb needs WANDB_API_KEY or a ~/.netrc entry (or WANDB_MODE=offline),
swanlab SWANLAB_API_KEY (or SWANLAB_MODE=local/offline), mlflow a tracking URI it can write
(verl >= 0.5 defaults to sqlite:////tmp/mlruns.db), tensorboard a writable TENSORBOARD_DIR (else
tensorboard_log/<project>/<experiment> in the job's working directory). A credential's value is
never shown: only whether it is set and where.
"""

import netrc
import os
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlparse

from ...matrix import parse_version
from ...paths import writable_problem
from ..rules import Finding

__all__ = ["backends", "check"]

KNOWN = ("console", "wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "clearml", "trackio", "file")
#: (first release, the back-ends its Tracking takes), oldest first. Source: ``supported_backend`` in
#: verl/utils/tracking.py at each tag (v0.1: 'tracking' is its W&B back-end), and in the 0.7.1, 0.8.0
#: and 0.9.1 wheels (0.9.1 adds rl_insight; 0.8.0 has none).
SUPPORTED = (("0.1", ("tracking", "console")),
             ("0.2", ("wandb", "mlflow", "swanlab", "console")),
             ("0.3", ("wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "console")),
             ("0.4", ("wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "console", "clearml")),
             ("0.6", KNOWN),
             ("0.9", KNOWN + ("rl_insight",)))


def supported(release: Optional[str]) -> Tuple[str, ...]:
    """The back-end names verl ``release``'s Tracking accepts (:data:`SUPPORTED`; the newest list
    when the release is unknown or unparseable)."""
    v = parse_version(release)
    got: Tuple[str, ...] = SUPPORTED[-1][1]
    if v is None:
        return got
    for first, names in SUPPORTED:
        f = parse_version(first)
        if f is not None and v >= f:
            got = names
    return got
_PACKAGE = {"wandb": "wandb", "swanlab": "swanlab", "mlflow": "mlflow", "tensorboard": "tensorboard",
            "clearml": "clearml", "trackio": "trackio", "vemlp_wandb": "volcengine-ml-platform"}


def backends(get: Any) -> List[str]:
    """trainer.logger as a list of names (a single string is one back-end)."""
    v = get("trainer.logger", None)
    if isinstance(v, str):
        v = [x.strip() for x in v.strip("[]").split(",") if x.strip()]
    if not isinstance(v, (list, tuple)):
        return []
    return [str(x).strip().strip("'\"") for x in v if str(x).strip()]


def _netrc_has(home: str, host: str) -> Optional[bool]:
    path = os.path.join(home, ".netrc")
    if not os.path.isfile(path):
        return False
    try:
        from ...paths import read_regular

        read_regular(path, 1 << 20)  # a regular file of a sane size only
        return netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return None


def _secret_note(wrapper: Any, name: str, env_here: bool) -> str:
    if wrapper is not None and wrapper.kind and "ray job submit" in wrapper.kind and name not in wrapper.env:
        return " (set in this shell, but a Ray job runs with the cluster's environment: pass it in the " \
               "runtime_env env_vars)" if env_here else ""
    return ""


def _wandb(env: Dict[str, str], wrapper: Any) -> Finding:
    mode = (env.get("WANDB_MODE") or "").lower()
    from .data import load_facts

    offline = load_facts()["loggers"]["wandb_offline_modes"]
    host = urlparse(env.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    ev: Dict[str, Any] = {"WANDB_MODE": mode or None, "WANDB_API_KEY": "set" if env.get("WANDB_API_KEY") else "unset",
                          "netrc_host": host}
    if mode in offline:
        return Finding("logger", "pass", "wandb: WANDB_MODE=%s needs no key" % mode, item="wandb", evidence=ev)
    if env.get("WANDB_API_KEY"):
        note = _secret_note(wrapper, "WANDB_API_KEY", True)
        status = "warn" if note else "pass"
        return Finding("logger", status, "wandb: WANDB_API_KEY is set (value not shown)%s" % note,
                       "add WANDB_API_KEY to the job's runtime_env env_vars (ray job submit --runtime-env-json "
                       "'{\"env_vars\": {\"WANDB_API_KEY\": \"...\"}}')" if note else None, item="wandb", evidence=ev)
    home = env.get("HOME") or os.path.expanduser("~")
    has = _netrc_has(home, host)
    ev["netrc"] = os.path.join(home, ".netrc")
    if has:
        return Finding("logger", "pass", "wandb: %s/.netrc has a key for %s (value not shown)" % (home, host),
                       item="wandb", evidence=ev)
    return Finding("logger", "fail", "wandb is in trainer.logger but the job has no W&B key: WANDB_API_KEY is unset "
                   "and %s/.netrc has no entry for %s%s; wandb.init runs in a Ray actor with no terminal, so it "
                   "cannot ask and stops ('api_key not configured (no-tty)')" % (
                       home, host, "" if has is False else " (unreadable)"),
                   "put your W&B key in WANDB_API_KEY in the job's environment (or run 'wandb login' as the user on "
                   "every node), or "
                   "WANDB_MODE=offline to log locally, or drop wandb from trainer.logger", item="wandb", evidence=ev,
                   stops="wandb UsageError in Tracking.__init__, when the trainer starts (after the models loaded)")


def _swanlab(env: Dict[str, str], wrapper: Any) -> Finding:
    from .data import load_facts

    mode = (env.get("SWANLAB_MODE") or "cloud").lower()
    ev = {"SWANLAB_MODE": mode, "SWANLAB_API_KEY": "set" if env.get("SWANLAB_API_KEY") else "unset"}
    if mode in load_facts()["loggers"]["swanlab_offline_modes"]:
        return Finding("logger", "pass", "swanlab: SWANLAB_MODE=%s needs no key" % mode, item="swanlab", evidence=ev)
    if env.get("SWANLAB_API_KEY"):
        return Finding("logger", "pass", "swanlab: SWANLAB_API_KEY is set (value not shown); verl logs in with it",
                       item="swanlab", evidence=ev)
    home = env.get("HOME") or os.path.expanduser("~")
    if os.path.isfile(os.path.join(home, ".swanlab", ".netrc")):
        return Finding("logger", "pass", "swanlab: a saved login is in %s/.swanlab (value not shown)" % home,
                       item="swanlab", evidence=ev)
    return Finding("logger", "fail", "swanlab is in trainer.logger with SWANLAB_MODE=%s but no SWANLAB_API_KEY and no "
                   "saved login: swanlab.init asks for a key, which a Ray actor cannot answer" % mode,
                   "put your SwanLab key in SWANLAB_API_KEY in the job's environment, or SWANLAB_MODE=local, or drop "
                   "swanlab from trainer.logger",
                   item="swanlab", evidence=ev)


def _mlflow(env: Dict[str, str], release: Optional[str], cwd: str) -> Finding:
    from .data import load_facts

    data = load_facts()["loggers"]
    uri = env.get("MLFLOW_TRACKING_URI")
    how = "MLFLOW_TRACKING_URI"
    if not uri:
        pv = parse_version(release) if release else None
        newer = pv is None or pv.release >= parse_version(data["mlflow_default_from"]).release
        uri, how = (data["mlflow_default_uri"], "verl's default (>= %s)" % data["mlflow_default_from"]) if newer else \
            ("file://" + os.path.join(cwd, "mlruns"), "mlflow's default (./mlruns)")
    u = urlparse(uri)
    auth = [k for k in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD") if env.get(k)]
    ev = {"uri": uri, "from": how, "auth_set": auth}
    if u.scheme in ("http", "https", "databricks"):
        return Finding("logger", "pass", "mlflow: tracking server %s (%s); credentials set: %s" % (
            u.hostname or uri, how, ", ".join(auth) or "none"), item="mlflow", evidence=ev)
    path = u.path if u.scheme in ("sqlite", "file") else uri
    if u.scheme == "sqlite":
        path = path[1:] if path.startswith("//") else path
    why = writable_problem(os.path.dirname(path) if u.scheme == "sqlite" else path)
    if why:
        return Finding("logger", "fail", "mlflow logs to %s (%s), but %s" % (uri, how, why),
                       "export MLFLOW_TRACKING_URI=sqlite:////tmp/mlruns.db (a writable path) or a tracking server",
                       item="mlflow", evidence=ev)
    return Finding("logger", "pass", "mlflow logs to %s (%s), writable" % (uri, how), item="mlflow", evidence=ev)


def _tensorboard(env: Dict[str, str], get: Any, cwd: str) -> Finding:
    from .data import load_facts

    d = env.get("TENSORBOARD_DIR")
    how = "TENSORBOARD_DIR"
    if not d:
        d = os.path.join(cwd, load_facts()["loggers"]["tensorboard_default"], str(get("trainer.project_name", "") or ""),
                         str(get("trainer.experiment_name", "") or ""))
        how = "verl's default under the job's working directory"
    why = writable_problem(d)
    ev = {"dir": d, "from": how}
    if why:
        return Finding("logger", "fail", "tensorboard writes to %s (%s), but %s" % (d, how, why),
                       "export TENSORBOARD_DIR=<a writable directory> for the job", item="tensorboard", evidence=ev)
    return Finding("logger", "pass", "tensorboard writes to %s (%s), writable" % (d, how), item="tensorboard",
                   evidence=ev)


def check(get: Any, names: List[str], env: Dict[str, str], wrapper: Any, facts: Dict[str, Any],
          release: Optional[str], explicit: bool = True) -> List[Finding]:
    """One ``logger.<name>`` row per back-end of trainer.logger (console and file need nothing).
    ``explicit`` False (trainer.logger is the config's default, not set by the launch): a missing
    credential is a WARN, since the job's own environment may carry it."""
    installed = (facts.get("loggers") or {}).get("installed") or {}
    cwd = (wrapper.working_dir if wrapper is not None and wrapper.working_dir else None) or os.getcwd()
    out: List[Finding] = []
    known = supported(release)
    for n in names:
        if n not in known:
            out.append(Finding("logger", "fail", "trainer.logger names %r, which verl%s's Tracking does not know (%s)" % (
                n, " " + release if release else "", ", ".join(known)), "use one of: %s" % ", ".join(known),
                item="unknown", evidence={"name": n, "supported": list(known)},
                stops="AssertionError in Tracking.__init__ ('... is not supported')"))
            continue
        if n == "tracking":  # verl 0.1's name for its W&B back-end
            n = "wandb"
        if n in installed and not installed[n]:
            out.append(Finding("logger", "fail", "%s is in trainer.logger but the package is not installed in the "
                               "target" % n, "pip install %s (into the verl environment), or drop %s from "
                               "trainer.logger" % (_PACKAGE[n], n), item=n, evidence={"package": _PACKAGE[n]},
                               stops="ModuleNotFoundError in Tracking.__init__ when the trainer starts"))
            continue
        if n in ("wandb", "swanlab"):
            f = _wandb(env, wrapper) if n == "wandb" else _swanlab(env, wrapper)
            if f.status == "fail" and not explicit:
                f.status = "warn"
                f.message += " (trainer.logger is the config's default here)"
            out.append(f)
        elif n == "mlflow":
            out.append(_mlflow(env, release, cwd))
        elif n == "tensorboard":
            out.append(_tensorboard(env, get, cwd))
    return out
