# Part of verl_startup.py (named on its "# parts:" line; preflight.probes.process.load_script puts it
# after the prelude and before the script, in the one module the child runs): verl's own lookups of
# config values that it makes only after Ray starts (the advantage estimator at the first
# compute_advantage, the rollout class when the rollout workers start), called here on the composed
# config once the dry start-up has reached its stop point. Standard library only at top level.


def _lookups(cfg, verl_root, spec):
    """For each of the release's ``lookups`` ({keys, call, choices, when}): call verl's own function
    on the config's values; a ValueError/AssertionError/KeyError raised by that function's own code
    is verl refusing the value (event ``lookup`` ok False, verl's message and file:line, the
    registry's names as ``choices``); any other exception, or one raised deeper (loading the engine
    the name was found for: vLLM is not installed here), is the value accepted. A function this
    release does not have is skipped."""
    try:
        from omegaconf import OmegaConf
    except Exception:
        return
    for look in spec.get("lookups") or []:
        owner, attr = _resolve(look["call"])
        fn = getattr(owner, attr, None) if owner is not None else None
        if fn is None:
            continue
        keys = list(look["keys"])
        values = [OmegaConf.select(cfg, k, default=None) for k in keys]
        if values[0] is None:
            continue
        choices = None
        if look.get("choices"):
            c_owner, c_attr = _resolve(look["choices"])
            reg = getattr(c_owner, c_attr, None) if c_owner is not None else None
            if isinstance(reg, dict):
                choices = sorted("/".join(str(x) for x in k) if isinstance(k, tuple) else str(k) for k in reg)
        rec = {"keys": keys, "values": [str(v) for v in values], "function": look["call"], "when": look.get("when"),
               "choices": choices}
        try:
            fn(*values)
            emit("lookup", ok=True, **rec)
        except Exception as exc:
            tb = exc.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            own = tb is not None and tb.tb_frame.f_code is getattr(fn, "__code__", None)
            if own and isinstance(exc, (ValueError, AssertionError, KeyError)):  # the lookup itself refused
                err = _error(exc, verl_root, look["call"].rpartition(":")[2])
                err.pop("frames", None)
                emit("lookup", ok=False, error=err, **rec)
            else:  # found, then failed loading what it names (vLLM not installed here)
                emit("lookup", ok=True, note="%s: %s" % (type(exc).__name__, str(exc)[:200]), **rec)
