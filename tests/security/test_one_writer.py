"""Mechanism "one writer": no module of preflight/ writes a file, makes a directory, renames,
copies, links or extracts except through preflight/atomic.py. The AST of every module is walked;
what remains is the short list below, each with the reason it is safe (none of them writes to a
path a user named)."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "preflight")

#: (module, function): why it may write without the writer.
ALLOWED = {
    ("preflight/probes/_supervise.py", "_write"): "the supervisor's own process (stdlib only, no preflight "
                                                  "imports): its pid/status files in the private directory "
                                                  "the parent made with mkdtemp",
    ("preflight/probes/nvml.py", "_main"): "runs as the NVML probe process: appends to its private events file",
}

#: calls that write: (object name or None for a builtin, attribute)
_CALLS = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("os", "link"), ("os", "symlink"),
          ("os", "makedirs"), ("os", "mkfifo"), ("os", "mknod"), ("os", "truncate"),
          ("shutil", "copy"), ("shutil", "copy2"), ("shutil", "copyfile"), ("shutil", "copytree"),
          ("shutil", "move"), ("tempfile", "NamedTemporaryFile"), ("tempfile", "TemporaryFile"),
          ("tempfile", "SpooledTemporaryFile")}
_METHODS = {"write_text", "write_bytes", "touch", "extractall", "symlink_to", "hardlink_to"}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def _mode_writes(call):
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return True  # a mode computed at run time: counted as a write


def _names(node):
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _is_devnull(arg):
    return isinstance(arg, ast.Attribute) and arg.attr == "devnull"


def writes_in(path):
    """(line, function, what) for each raw write in the module at ``path``."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = []

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call):
                fn = child.func
                what = None
                if isinstance(fn, ast.Name) and fn.id == "open" and _mode_writes(child) and not (
                        child.args and _is_devnull(child.args[0])):
                    what = "open(..., write mode)"
                elif isinstance(fn, ast.Attribute):
                    base = fn.value.id if isinstance(fn.value, ast.Name) else None
                    if (base, fn.attr) in _CALLS:
                        what = "%s.%s" % (base, fn.attr)
                    elif fn.attr in _METHODS:
                        what = ".%s()" % fn.attr
                    elif base == "os" and fn.attr == "open" and len(child.args) > 1 and \
                            _names(child.args[1]) & _WRITE_FLAGS and not _is_devnull(child.args[0]):
                        what = "os.open(..., write flags)"
                    elif fn.attr == "open" and base in ("tarfile", "zipfile") and _mode_writes(child) and not any(
                            k.arg == "fileobj" for k in child.keywords):  # a fileobj is written by its owner
                        what = "%s.open(..., write mode)" % base
                if what:
                    found.append((child.lineno, f, what))
            visit(child, f)

    visit(tree, None)
    return found


def test_every_write_goes_through_the_one_writer():
    left = []
    for dirpath, dirnames, filenames in os.walk(PKG):
        rel_dir = os.path.relpath(dirpath, ROOT)
        if rel_dir.startswith(os.path.join("preflight", "target")) or "_vendor" in rel_dir:
            dirnames[:] = []
            continue  # target scripts run inside the target interpreter, stdlib only
        for fn in filenames:
            if not fn.endswith(".py"):
                continue
            rel = os.path.join(rel_dir, fn)
            if rel == os.path.join("preflight", "atomic.py"):
                continue
            for line, func, what in writes_in(os.path.join(ROOT, rel)):
                if (rel, func) not in ALLOWED:
                    left.append("%s:%d (%s): %s" % (rel, line, func, what))
    assert not left, "raw writes outside preflight/atomic.py:\n" + "\n".join(left)


@pytest.mark.parametrize("src,n", [
    ("open(p, 'w')", 1), ("open(p, 'rb')", 0), ("open(p)", 0), ("open(os.devnull, 'wb')", 0),
    ("os.open(p, os.O_WRONLY | os.O_CREAT)", 1), ("os.open(p, os.O_RDONLY)", 0), ("os.replace(a, b)", 1),
    ("shutil.copyfile(a, b)", 1), ("pathlib.Path(p).write_text('x')", 1), ("tar.extractall(d)", 1),
    ("tarfile.open(p, mode='w|')", 1), ("tarfile.open(fileobj=a, mode='w|')", 0), ("os.makedirs(d)", 1)])
def test_the_scanner_sees_each_kind_of_write(tmp_path, src, n):
    f = tmp_path / "m.py"
    f.write_text("import os, shutil, pathlib, tarfile\ndef g(p, a, b, d, tar):\n    %s\n" % src)
    assert len(writes_in(str(f))) == n
