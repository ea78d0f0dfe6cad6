"""verl-preflight: tells whether a machine can run verl, and why not.

Layout: ``checks/`` one module per stage, ``probes/`` how facts are read (subprocesses, NVML,
/proc), ``target/`` scripts that run inside the interpreter being checked, ``matrix/`` the
compatibility data accessors, ``report/`` renderers, ``runner.py`` stage gating, ``cli.py``
the command line.
"""

__version__ = "0.1.0"
