# Part of verl_startup.py (named on its "# parts:" line; preflight.probes.process.load_script puts it
# after the prelude and before the script, in the one module the child runs): what a batch of
# launches needs between two of them, verl imported once. Standard library only.
import os
import sys


def _library_dirs():
    """The directories installed code lives in (the standard library, site-packages)."""
    import sysconfig

    out = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            out.add(os.path.realpath(sysconfig.get_path(key)))
        except Exception:
            pass
    return tuple(sorted(d + os.sep for d in out if d))


def _forget_user_modules(known, libs):
    """Before the next launch of a batch: drop the modules the previous one loaded from the user's
    files (a reward function, a custom dataset class): verl 0.6 caches a reward file as
    sys.modules["custom_module"], and every later launch would get the first one's functions."""
    for name in list(sys.modules):
        if name in known:
            continue
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None)
        if name == "custom_module" or (path and not os.path.realpath(path).startswith(libs)):
            sys.modules.pop(name, None)
