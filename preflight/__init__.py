"""verl-preflight: tells whether a machine can run verl, and why not.

Layout: ``checks/`` one module per stage, ``probes/`` how facts are read (subprocesses, NVML,
/proc), ``target/`` scripts that run inside the interpreter being checked, ``matrix/`` the
compatibility data accessors, ``report/`` renderers, ``runner.py`` stage gating, ``cli.py``
the command line.
"""

__version__ = "0.1.0"


def _use_vendored() -> None:
    """In the zipapp, the vendored libraries (rich, packaging, tomli, pynvml) live in
    ``preflight/_vendor/`` (see tools/build_pyz.py): put that folder first on sys.path. In a
    checkout or an installed package there is no such folder and the installed ones are used."""
    import os
    import sys

    vendor = os.path.join(os.path.dirname(__file__), "_vendor")  # no abspath: zipimport on 3.8
    try:
        __loader__.get_data(os.path.join(vendor, "vendor.txt"))  # type: ignore[name-defined]
    except (OSError, AttributeError, NameError):
        return
    if vendor not in sys.path:
        sys.path.insert(0, vendor)


_use_vendored()
