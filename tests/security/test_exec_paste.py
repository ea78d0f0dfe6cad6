"""Printed commands paste as printed, and nothing in them runs (issue 21, fault_cases_3.md x05,
i01): every command and fix the tool prints is built from an argument list, the user's values
shell-quoted (preflight/shell.py).

The truth is a real shell: each printed command is handed to ``sh`` as the words of ``set --``
(every expansion sh does on a pasted line happens: parameter, command substitution, quote
removal, field splitting, globbing), in an empty directory, and its words are printed back
NUL-separated. ``MARK`` (which every hostile value tries to create) must never appear, and the
words must be the intended ones.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from preflight import shell

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INJ = pytest.mark.fault("WRONG")  # the suite's kinds: a pasted fix that runs code is a wrong, dangerous answer

#: Values that run ``touch MARK`` (or break the line) when a shell sees them unquoted.
HOSTILE = ['"$(touch MARK)"', "$(touch MARK)", "`touch MARK`", "a;touch MARK", "a|touch MARK", "a&&touch MARK",
           "a\ntouch MARK", "it's \"q\" $(touch MARK)", "--flag=$(touch MARK)", "ünï $(touch MARK) ✓", "*",
           "$HOME${IFS}x", "a'\\''b"]

HEADS = ("write ", "set ", "pip ", "uv ", "docker ", "podman ", "preflight ", "python3 ", "ulimit ")


def paste(text, where):
    """The words ``sh`` makes of ``text`` pasted as arguments, run in ``where``; (rc, words)."""
    p = subprocess.run(["sh", "-c", "set -- " + text + "\nprintf '%s\\0' \"$@\""], cwd=str(where),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    return p.returncode, [w.decode("utf-8", "surrogateescape") for w in p.stdout.split(b"\0")[:-1]]


def _end(text, i):
    """End of the command starting at ``i``: the first unquoted prose delimiter."""
    q = None
    while i < len(text):
        c = text[i]
        if q == "'":
            q = None if c == "'" else q
        elif q == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                q = None
        elif c == "'" and 0 < i < len(text) - 1 and text[i - 1].isalpha() and text[i + 1].isalpha():
            return text.rfind(" ", 0, i) + 1  # prose ("verl's"): the command ended before this word
        elif c in "'\"":
            q = c
        elif c == "\\":
            i += 1
        elif c in "();" or text.startswith(", ", i) or text.startswith(" or ", i) or text.startswith(" and ", i) \
                or text.startswith(". ", i) or text.startswith("; ", i):
            return i
        i += 1
    return len(text)


def commands_in(text, heads=HEADS):
    """Every command a fix or message shows: from a command word (or the quoted interpreter) to
    the first unquoted prose delimiter."""
    found = []
    for m in re.finditer(r"(?:(?<=^)|(?<=[\s:`]))(%s)" % "|".join(re.escape(h) for h in heads), text):
        found.append(text[m.start():_end(text, m.start())].rstrip(" .,"))
    return found


def assert_inert(texts, where, heads=HEADS):
    """Paste every command in ``texts``; MARK never made; returns [(command, words)]."""
    out = []
    for t in texts:
        for cmd in commands_in(t, heads):
            rc, words = paste(cmd, where)
            assert not os.path.exists(os.path.join(str(where), "MARK")), (t, cmd)
            assert rc == 0, (t, cmd)  # a quote left open is a quoting bug too
            out.append((cmd, words))
    return out


def fixes_of(doc):
    return [r.get("fix") or "" for r in doc.get("results", [])] + [r.get("message") or "" for r in doc.get("results", [])]


def test_shell_builder_round_trips_through_sh(tmp_path):
    for v in HOSTILE + ["", " ", "plain", "a=b", "'", '"', "\\", "\t", "$'x'"]:
        argv = ["docker", "build", "-t", v, "ctx " + v]
        rc, words = paste(shell.command(argv), tmp_path)
        assert rc == 0 and words == argv, (v, shell.command(argv), words)
        assert not (tmp_path / "MARK").exists()


#: Characters a terminal or the report cannot show as themselves (undecodable file-name bytes as
#: surrogates, C0/C1 controls, line and bidi separators) beside shell syntax, for the printf path.
UNSHOWN = ["\udcff", "\udc80", "\udce9", "\x1b", "\x07", "\t", "\r", "\n", "\x7f", "\x85", "\u2028", "\u202e",
           "'", '"', "$", "`", "\\", "%", "(", ")", ";", " ", "*", "a", "é", "✓", "\n\n"]


def _bytes(word):
    return word.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("sh", ["dash", "bash"])
def test_unshowable_bytes_paste_back_exactly(tmp_path, sh):
    """W2: a word with bytes no terminal shows (a non-UTF-8 file name, a control character) is
    quoted as plain one-line text (printf octal escapes), and real dash and bash give back the same
    bytes; the report's one-line pass leaves it as it is (so what is printed is what pastes)."""
    import random

    from preflight.report.text import one_line

    rnd = random.Random(5)
    words = ["f\udcff", "/tmp/env\udcff/python", "a\nb", "\n\nx", "a\x01\n", "%s\\n", "\udcff\n"]
    words += ["".join(rnd.choice(UNSHOWN) for _ in range(rnd.randint(1, 9))) for _ in range(1500)]
    script = "set -- %s\nprintf '%%s\\0' \"$@\"" % " ".join(shell.quote(w) for w in words)
    p = subprocess.run([sh, "-c", script], cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    got = p.stdout.split(b"\0")[:-1]
    assert p.returncode == 0 and len(got) == len(words), p.stderr[:500]
    assert [g for g, w in zip(got, words) if g != _bytes(w)] == []
    assert not (tmp_path / "MARK").exists()
    kept = [w for w in words if not w.endswith("\n")]  # $(...) drops trailing newlines: such a word keeps its own
    assert [w for w in kept if one_line(shell.quote(w)) != shell.quote(w) or not shell.quote(w).isprintable()] == []


def test_only_the_shell_module_quotes():
    """Every printed command goes through preflight/shell.py: no other module of the package calls
    shlex.quote / shlex.join / pipes.quote (a second quoter is where the W2 bytes were lost)."""
    import ast

    bad = []
    for base, _, names in os.walk(os.path.join(ROOT, "preflight")):
        if "_vendor" in base:
            continue
        for n in names:
            path = os.path.join(base, n)
            if not n.endswith(".py") or path.endswith(os.path.join("preflight", "shell.py")):
                continue
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                        and node.value.id in ("shlex", "pipes") and node.attr in ("quote", "join"):
                    bad.append("%s:%d %s.%s" % (path, node.lineno, node.value.id, node.attr))
                if isinstance(node, ast.ImportFrom) and node.module in ("shlex", "pipes") \
                        and any(a.name in ("quote", "join") for a in node.names):
                    bad.append("%s:%d from %s import" % (path, node.lineno, node.module))
    assert not bad, "\n".join(bad)


def pf(*args, cwd=None, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "preflight"] + list(args), cwd=cwd or ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout,
                          env=dict(os.environ, COLUMNS="400", **(env or {})))


@INJ
@pytest.mark.parametrize("value", [v for v in HOSTILE if "$HOME" not in v])  # config expands $VAR in words itself
def test_x05_config_fixes_quote_the_users_value(tmp_path, value):
    """x05: a typo'd key whose value is hostile: the printed 'write K=V instead of ...' pastes as
    exactly the words the user gave, the key corrected."""
    out = tmp_path / "c.json"
    word = "trainer.projct_name=%s" % json.dumps(value)  # a Hydra quoted string, as a recipe writes it
    p = pf("config", "--verl", "0.9.1", "--json", str(out), "--", word, "trainer.logger=['console']")
    assert out.exists(), p.stdout + p.stderr
    doc = json.loads(out.read_text())
    where = tmp_path / "sh"
    where.mkdir()
    got = dict(assert_inert(fixes_of(doc) + p.stdout.splitlines(), where))
    want = ["write", "trainer.project_name=%s" % json.dumps(value), "instead", "of", word]
    assert want in got.values(), got


@INJ
@pytest.mark.parametrize("value", HOSTILE + ["ctx dir"])
@pytest.mark.parametrize("secret", [False, True])
def test_i01_image_build_command(tmp_path, value, secret):
    """i01: image's 'build it with: docker build -t TAG DIR' quotes -o and --tag (the line
    image prints, from the function that builds it; the full command was run by hand: 8 min of
    pip locking, too slow for the suite)."""
    from preflight.commands.image import build_line

    out, tag = str(tmp_path / ("o " + value.replace("/", "_"))), "v:" + value
    [(cmd, words)] = assert_inert(["build it with: " + build_line(tag, out, secret)], tmp_path)
    netrc = ["--secret", "id=netrc,src=%s/.netrc" % os.environ["HOME"]] if secret else []
    assert words == ["docker", "build"] + netrc + ["-t", tag, out], cmd


@INJ
@pytest.mark.parametrize("name", ["v $(touch MARK)", "v;touch MARK", "v`touch MARK`", "it's \"q\"", "ünï|x"])
def test_check_fixes_quote_the_interpreter_path(tmp_path, name):
    """``check --python PATH`` where PATH holds shell syntax: every fix that runs the target
    (``PATH -m pip install ...``, ``PATH -m compileall ...``) pastes as PATH itself."""
    d = tmp_path / name / "bin"
    d.mkdir(parents=True)
    py = d / "python"
    os.symlink(sys.executable, str(py))
    out = tmp_path / "r.json"
    p = pf("check", "--python", str(py), "--stage", "python,packages", "--json", str(out), "-v")
    assert out.exists(), p.stdout + p.stderr
    doc = json.loads(out.read_text())
    where = tmp_path / "sh"
    where.mkdir()
    heads = HEADS + (shell.quote(str(py)) + " ",)
    got = assert_inert(fixes_of(doc) + p.stdout.splitlines(), where, heads)
    runs_target = [w for _, w in got if w and w[0] == str(py)]
    assert runs_target, [c for c, _ in got]  # at least one fix runs the target itself, its path one word
    assert all(w[1] in ("-m", "-c", "-X") for w in runs_target), runs_target


@INJ
def test_every_signature_fix_quotes_its_values(tmp_path):
    """diagnose.classify fills each signature's fix with values read from the target (a torch
    version from metadata, a dist name): with hostile values, every command in every fix of
    matrices/signatures.toml pastes inert, the value one word."""
    import copy

    from preflight import diagnose, matrix

    mx = matrix.load()
    sigs = mx.curated.get("signatures", {}).get("signature", [])
    assert len(sigs) > 10
    bad = "2.11.0$(touch MARK);`touch MARK`"
    seen = 0
    for sig in sigs:
        one = copy.copy(mx)
        one.curated = dict(mx.curated, signatures={"signature": [dict(sig, pattern=r"(?P<name>x)?")]})
        d = diagnose.classify(one, "any text", dist="d $(touch MARK)", torch=bad, python="/p $(touch MARK)/python")
        got = assert_inert([d.fix], tmp_path)
        seen += len(got)
        for cmd, words in got:  # a value that reaches a command is one whole word of it
            assert all(w in (bad, "d $(touch MARK)") or "MARK" not in w for w in words), (sig["id"], cmd, words)
    assert seen, "no signature fix holds a command"


@INJ
@pytest.mark.parametrize("version", ["0.9.1'$(touch MARK)'", "2.11.0;touch MARK", "1.0`touch MARK`"])
def test_check_fixes_with_hostile_package_metadata(tmp_path, version):
    """A target whose installed verl, torch and vllm carry versions holding shell syntax (a
    package someone else built): every command in every fix and message of the packages and
    imports stages pastes inert."""
    from faultkit import fake_dist, target

    files = {}
    for name in ("verl", "torch", "vllm", "tensordict"):
        files.update(fake_dist(name, version, "__version__ = %r\n" % version))
    py, _ = target(tmp_path, files)
    out = tmp_path / "r.json"
    p = pf("check", "--python", py, "--stage", "python,packages,imports", "--json", str(out), "-v", timeout=600)
    assert out.exists(), p.stdout[-2000:] + p.stderr[-2000:]
    doc = json.loads(out.read_text())
    where = tmp_path / "sh"
    where.mkdir()
    got = assert_inert(fixes_of(doc) + p.stdout.splitlines(), where, HEADS + (shell.quote(py) + " ",))
    assert got


@INJ
def test_w2_fix_for_a_non_utf8_interpreter_path_pastes_exactly(tmp_path):
    """W2: ``check --python DIR/python`` where DIR's name holds the byte 0xff (not UTF-8): the fixes
    that run the target are printed as one line of plain text, and pasted into sh they name that
    very path, byte for byte (U+FFFD or a raw byte would name another file or none)."""
    d = os.path.join(os.fsencode(str(tmp_path)), b"env\xff", b"bin")
    os.makedirs(d)
    py = os.path.join(d, b"python")
    os.symlink(sys.executable, py)
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "preflight", "check", "--python", py, "--stage", "python,packages",
                        "--json", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                       env=dict(os.environ, COLUMNS="400"))
    assert out.exists(), p.stderr[-2000:]
    text = p.stdout.decode("utf-8", "surrogateescape")
    where = tmp_path / "sh"
    where.mkdir()
    fsname = os.fsdecode(py)
    heads = HEADS + (shell.quote(fsname) + " ",)
    console = [ln for ln in text.splitlines() if "fix:" in ln]
    doc = json.loads(out.read_text())
    got = assert_inert(console + fixes_of(doc), where, heads)
    runs_target = [w for _, w in got if w and w[0] == fsname]
    assert len(runs_target) >= 2, [c for c, _ in got]  # from the console and from the JSON report
    assert all(ln.isprintable() for ln in console), console
