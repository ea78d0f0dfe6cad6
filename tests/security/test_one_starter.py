"""Mechanism "one starter": no module of preflight/ starts a process except through the two
supervised primitives, preflight/probes/child.py (commands: pip, uv, docker, a build tool) and
preflight/probes/process.py (target scripts). Both give every child a working directory no other
user can plant a module in (a ``python -c``/``-m`` child has its working directory first on
sys.path: a ``platform.py`` or ``pip/`` left in /tmp would run as the invoker, root in
provisioning), a deadline, and a supervisor that stops whatever it started. The AST of every module
is walked (imports inside functions count); the supervisor itself, which execs the command it
was handed, is the one exception."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "preflight")

#: modules that may start processes, and why
ALLOWED = {
    "preflight/probes/child.py": "the primitive for commands (supervised, safe working directory, deadline)",
    "preflight/probes/process.py": "the primitive for target scripts (the same supervisor)",
    "preflight/probes/_supervise.py": "the supervisor process itself: execs the command it was handed",
}

#: (module, attribute) calls that start a process
STARTS = {("subprocess", n) for n in ("run", "Popen", "call", "check_call", "check_output", "getoutput",
                                      "getstatusoutput")} | \
    {("os", n) for n in ("system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp",
                         "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp",
                         "spawnlpe", "posix_spawn", "posix_spawnp", "fork", "forkpty")} | \
    {("pty", "spawn"), ("pty", "fork"), ("multiprocessing", "Process"), ("asyncio", "create_subprocess_exec"),
     ("asyncio", "create_subprocess_shell")}


def _starts(path):
    """(line, 'module.name') of every process start in the module at ``path``, also through
    ``from subprocess import run`` and ``import subprocess as sp``."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    alias, names = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                alias[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                names[a.asname or a.name] = (node.module, a.name)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            key = (alias.get(f.value.id, f.value.id), f.attr)
        elif isinstance(f, ast.Name) and f.id in names:
            key = names[f.id]
        else:
            continue
        if key in STARTS:
            out.append((node.lineno, "%s.%s" % key))
    return out


def _modules():
    for d, dirs, files in os.walk(PKG):
        dirs[:] = sorted(x for x in dirs if x not in ("_vendor", "__pycache__", "target"))
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                yield os.path.relpath(path, ROOT), path


def test_no_module_starts_a_process_but_the_supervised_primitives():
    bad = ["%s:%d %s" % (rel, line, what) for rel, path in _modules() if rel not in ALLOWED
           for line, what in _starts(path)]
    assert not bad, "start these through preflight.probes.child.run (or process.run_script): %s" % "; ".join(bad)


def test_the_reader_finds_every_spelling(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import subprocess as sp\nfrom os import system\nimport os\n"
                   "def f():\n    sp.run(['x'])\n    system('x')\n    os.execvp('x', ['x'])\n"
                   "    from subprocess import Popen as P\n    P(['x'])\n    subprocess.PIPE\n")
    assert [w for _, w in _starts(str(src))] == ["subprocess.run", "os.system", "os.execvp", "subprocess.Popen"]


def test_the_primitives_are_where_the_list_says():
    found = {rel for rel, path in _modules() if _starts(path)}
    assert found <= set(ALLOWED) and "preflight/probes/child.py" in found and "preflight/probes/process.py" in found
