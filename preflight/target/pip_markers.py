# pip's own resolver, in this process, with the requirement markers evaluated for another
# interpreter and platform: the target's full PEP 508 marker environment (ARGS["environment"])
# replaces pip's vendored packaging.markers.default_environment, which Marker.evaluate merges
# under every marker pip evaluates (the requirements given, each dependency's Requires-Dist, the
# report's "environment"), then pip's main runs ARGS["pip_args"] (the arguments after
# "python -m pip": --dry-run --report ... --python-version X.Y --platform ...). The arguments come
# in the private file of the prelude, never argv. Exits with pip's own status; 3 when the
# environment could not be given (a pip whose markers do not go through default_environment).
# Emits "pip_markers" with the environment given and the check that took it, before pip runs.

import sys

#: Every PEP 508 marker variable pip's default environment names (packaging's default_environment).
KEYS = ("implementation_name", "implementation_version", "os_name", "platform_machine", "platform_release",
        "platform_system", "platform_version", "python_full_version", "platform_python_implementation",
        "python_version", "sys_platform")


def _give(env):
    """Replace default_environment wherever pip reads it; return (module names patched, the
    check: a marker naming the target's python_version, platform_machine and sys_platform is
    True and one naming another python_version or machine False)."""
    import pip._vendor.packaging.markers as vendored
    from pip._vendor.packaging.markers import Marker

    original = vendored.default_environment

    def default_environment():
        return dict(env)

    default_environment.__doc__ = "The target's marker environment (preflight target/pip_markers.py)."
    patched = []
    mods = [vendored, sys.modules.get(Marker.__module__)]
    # the modules that import the function by name (the report's and inspect's "environment")
    for name in ("pip._internal.models.installation_report", "pip._internal.commands.inspect"):
        try:
            __import__(name)
        except ImportError:
            continue
        mods.append(sys.modules.get(name))
    for name, mod in list(sys.modules.items()):
        if name.startswith("pip") and mod is not None and getattr(mod, "default_environment", None) is original:
            mods.append(mod)
    for mod in mods:
        if mod is not None and getattr(mod, "default_environment", None) in (original, default_environment):
            mod.default_environment = default_environment
            if mod.__name__ not in patched:
                patched.append(mod.__name__)
    probe = 'python_version == "%s" and platform_machine == "%s" and sys_platform == "%s"' % (
        env["python_version"], env["platform_machine"], env["sys_platform"])
    other = 'python_version != "%s" or platform_machine != "%s"' % (env["python_version"], env["platform_machine"])
    ok = Marker(probe).evaluate() and not Marker(other).evaluate()
    return patched, bool(ok)


def main():
    env = ARGS.get("environment") or {}
    missing = [k for k in KEYS if not isinstance(env.get(k), str)]
    if missing:
        emit("pip_markers", ok=False, error="environment lacks %s" % ", ".join(missing))
        return 3
    try:
        import pip
        from pip._internal.cli.main import main as pip_main
    except ImportError as exc:
        emit("pip_markers", ok=False, error="no pip here: %s" % exc)
        return 3
    try:
        patched, ok = _give({k: env[k] for k in KEYS})
    except Exception as exc:  # a pip whose vendored packaging is laid out otherwise
        emit("pip_markers", ok=False, pip=pip.__version__, error="%s: %s" % (type(exc).__name__, exc))
        return 3
    emit("pip_markers", ok=ok, pip=pip.__version__, patched=patched, environment=env)
    if not ok:
        sys.stderr.write("pip_markers: the marker environment did not take in pip %s\n" % pip.__version__)
        return 3
    return pip_main(list(ARGS.get("pip_args") or []))


sys.exit(main())
