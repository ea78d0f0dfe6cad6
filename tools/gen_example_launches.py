#!/usr/bin/env python3
"""Extract the launch lines of verl's example scripts as test data (tests/data/verl_example_launches.json).

Reads ``examples/**/*.sh`` and ``recipe/**/*.sh`` of a verl git checkout at each release tag (and
the checkout's HEAD), keeps the scripts that run ``python3 -m verl.trainer.main_ppo``, and stores, per script, only the
overrides and ``--config-name`` of that command, with the tag and path they came from. The script is
read as bash reads it (:class:`Shell`): its statements top to bottom (the branch of an ``if`` that
bash takes where the test compares values the script sets (:class:`Branches`), else every branch; a
loop's body once), quoting, ``\``-newline, multi-line strings, ``$VAR``/``${VAR:-d}``/``${VAR:=d}``/
``${VAR:+alt}`` and the pattern forms, arrays (``A=(...)``, ``A+=(...)``, ``"${A[@]}"``, ``${A[*]}``),
``$(( ))`` with nested parentheses and bare names, brace expansion and field splitting; no command is run
(``$(command)`` is a local path). A variable the script reads unset with no default becomes a local path
``/tmp/verl-examples/<NAME>`` ("local paths substituted"), or a count (8 GPUs, 1 node) where its name says
the scheduler sets it to one (``SLURM_JOB_NUM_NODES``). No script text other than those override strings is
stored. ``--check-bash`` runs real bash on each script's assignments and launch words (:func:`bash_words`)
and compares its words with the extractor's.

The same launch at several tags is stored once with every tag in ``refs``.

Usage: python3 tools/gen_example_launches.py --repo /path/to/verl.git [--out tests/data/verl_example_launches.json]
       python3 tools/gen_example_launches.py --repo /path/to/verl.git --check-bash
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight.launch.overrides import parse_launch  # noqa: E402

ENTRY = "verl.trainer.main_ppo"
#: Variables a scheduler or the user's shell sets to a count (SLURM_JOB_NUM_NODES, NNODES, ARNOLD_WORKER_GPU...):
#: a path stand-in there would be a launch no shell produces, so they stand in as 8 (GPUs) or 1 (nodes).
_COUNT = re.compile(r"(^|_)(NUM|NNODES|NODES|N?GPUS?|WORLD_SIZE|NPROC)(_|$)")
#: What ``$(command)`` and `` `command` `` give: the command is never run.
CMD = "/tmp/verl-examples/cmd"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ASSIGN = re.compile(r"^(%s)(?:\[([^\]]*)\])?(\+?)=" % _NAME)
_META = set(" \t\n;&|<>()")
#: Words that open or close a compound command: the commands inside run in order (both branches of an
#: ``if``, a loop's body once); ``for``/``case``/``select`` heads and ``((...))`` assign nothing here.
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time", "esac"}
_DECLARE = {"export", "declare", "typeset", "local", "readonly"}


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo] + list(args), stdout=subprocess.PIPE, check=True,
                          universal_newlines=True).stdout


class ShellError(ValueError):
    """What bash would refuse (an unterminated quote, an arithmetic it cannot evaluate)."""


# ---- scanning: where a quote, ${...}, $(...), $((...)) or `...` ends (index after it) -------------
def _end_squote(t, i):
    j = t.find("'", i)
    if j < 0:
        raise ShellError("unterminated '")
    return j + 1


def _end_backtick(t, i):
    while i < len(t):
        if t[i] == "\\":
            i += 2
            continue
        if t[i] == "`":
            return i + 1
        i += 1
    raise ShellError("unterminated `")


def _end_dquote(t, i):
    while i < len(t):
        c = t[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif c == "$":
            i = _end_dollar(t, i)
        elif c == "`":
            i = _end_backtick(t, i + 1)
        else:
            i += 1
    raise ShellError('unterminated "')


def _end_arith(t, i):
    """After ``$((``: the index after its ``))``, or None where the text is ``$( (command) )``."""
    depth = 0
    while i < len(t):
        c = t[i]
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i + 2 if t.startswith("))", i) else None
            depth -= 1
        elif c == "$" and t[i + 1:i + 2] in ("{", "("):
            i = _end_dollar(t, i)
            continue
        elif c in "'\"`\n;":
            return None
        i += 1
    return None


def _skip(t, i, any_dollar=True):
    """The index after the escape, quoted span or expansion that starts at ``t[i]``, or None when
    none starts there (``any_dollar``: every ``$`` starts one; else only ``${`` and ``$(``)."""
    c = t[i]
    if c == "\\":
        return i + 2
    if c == "'":
        return _end_squote(t, i + 1)
    if c == '"':
        return _end_dquote(t, i + 1)
    if c == "`":
        return _end_backtick(t, i + 1)
    if c == "$" and (any_dollar or t[i + 1:i + 2] in ("{", "(")):
        return _end_dollar(t, i)
    return None


def _end_paren(t, i):
    depth = 1
    while i < len(t):
        c = t[i]
        j = _skip(t, i, any_dollar=False)
        if j is not None:
            i = j
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if not depth:
                return i + 1
        i += 1
    raise ShellError("unterminated $(")


def _end_brace(t, i):
    """After ``${``: bash ends the expansion at the first ``}`` outside quotes and nested expansions
    (``${X:-{a}b}`` is ``{a`` then ``b}``)."""
    while i < len(t):
        j = _skip(t, i, any_dollar=False)
        if j is not None:
            i = j
        elif t[i] == "}":
            return i + 1
        else:
            i += 1
    raise ShellError("unterminated ${")


def _end_dollar(t, i):
    if t.startswith("$((", i):
        end = _end_arith(t, i + 3)
        return end if end is not None else _end_paren(t, i + 2)
    if t.startswith("$(", i):
        return _end_paren(t, i + 2)
    if t.startswith("${", i):
        return _end_brace(t, i + 2)
    if t.startswith("$'", i):
        return _end_squote(t, i + 2)
    return i + 1


# ---- the script as statements: words, array literals, the operator that ends each -----------
def _scan_word(t, i):
    """One word from ``t[i]`` (quotes and expansions kept as written, ``\\``-newline dropped)."""
    parts, start = [], i
    while i < len(t):
        c = t[i]
        if c == "\\":
            if t[i + 1:i + 2] == "\n":
                parts.append(t[start:i])
                i += 2
                start = i
            else:
                i += 2
            continue
        if c in _META:
            break
        if c == "'":
            i = _end_squote(t, i + 1)
        elif c == '"':
            i = _end_dquote(t, i + 1)
        elif c == "$":
            i = _end_dollar(t, i)
        elif c == "`":
            i = _end_backtick(t, i + 1)
        else:
            i += 1
    parts.append(t[start:i])
    return "".join(parts), i


_REDIRECT = re.compile(r"\d*(<<<|<<-|<<|>>|>&|<&|&>>|&>|>\||<>|>|<)")


def _skip_heredocs(text, i, heredocs):
    """After the newline at ``i - 1``: the index past each pending heredoc's body (lines up to its delimiter)."""
    n = len(text)
    for delim, strip in heredocs:
        while i < n:
            j = text.find("\n", i)
            line = text[i:n if j < 0 else j]
            i = n if j < 0 else j + 1
            if (line.lstrip("\t") if strip else line) == delim:
                break
    return i


def _redirect(text, m, heredocs):
    """A redirection matched by ``m`` (``_REDIRECT``) skipped with its target; a heredoc's delimiter is added
    to ``heredocs``. Returns the index after it."""
    i, n = m.end(), len(text)
    while i < n and text[i] in " \t":
        i += 1
    if m.group(1) in (">&", "<&"):
        j = i
        while j < n and (text[j].isdigit() or text[j] == "-"):
            j += 1
        if j > i:
            return j
    target, i = _scan_word(text, i)
    if m.group(1) in ("<<", "<<-"):
        heredocs.append((re.sub(r"[\"'\\]", "", target), m.group(1) == "<<-"))
    return i


def _array_literal(text, i, raw):
    """The elements of ``NAME=(...)`` from ``text[i]`` (after the ``(``), as raw words, and the index after
    its ``)``; comments and newlines inside are skipped."""
    elems, n = [], len(text)
    while True:
        while i < n and (text[i] in " \t\r\n" or text.startswith("\\\n", i)):
            i += 2 if text[i] == "\\" else 1
        if i >= n:
            raise ShellError("unterminated array %s" % raw)
        if text[i] == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] == ")":
            return elems, i + 1
        else:
            e, i = _scan_word(text, i)
            if not e:
                raise ShellError("unexpected %r in array %s" % (text[i], raw))
            elems.append(e)


def statements(text):
    """``text`` (a bash script) as ``[(tokens, op)]``: each token ``("w", raw)`` or ``("arr", name,
    append, [raw...])`` (``NAME=(...)``/``NAME+=(...)``), ``op`` the operator that ended it (newline,
    ``;``, ``&&``, ``|``, ``(``...). Comments, redirections and heredoc bodies are dropped. Raises
    ShellError on an unterminated quote or expansion."""
    out, cur, heredocs, i, n = [], [], [], 0, len(text)

    def end(op):
        if cur:
            out.append((list(cur), op))
            del cur[:]

    while i < n:
        c = text[i]
        m = _REDIRECT.match(text, i)
        if c in " \t\r":
            i += 1
        elif text.startswith("\\\n", i) or text[i:] == "\\":  # a continuation (at the end: bash drops it)
            i += 2
        elif c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "\n":
            end("\n")
            i = _skip_heredocs(text, i + 1, heredocs)
            heredocs = []
        elif m and (c in "<>&" or m.group(0)[-1] in "<>&"):
            i = _redirect(text, m, heredocs)
        elif text.startswith(("&&", "||", ";;", "|&"), i):
            end(text[i:i + 2])
            i += 2
        elif text.startswith("((", i):  # an arithmetic command: assigns nothing the launch reads
            j = _end_arith(text, i + 2)
            cur.append(("w", text[i:j] if j else "(("))
            i = j if j else i + 2
        elif c in ";&|()":
            end(c)
            i += 1
        else:
            raw, i = _scan_word(text, i)
            am = re.match(r"^(%s)(\+?)=$" % _NAME, raw)
            if am and text.startswith("(", i):
                elems, i = _array_literal(text, i + 1, raw)
                cur.append(("arr", am.group(1), bool(am.group(2)), elems))
            elif raw:
                cur.append(("w", raw))
            else:
                raise ShellError("unexpected %r" % c)
    end("\n")
    return out


# ---- expansion ---------------------------------------------------------------------------------
class _Fields(object):
    """Words being built: quoted text joins the current word, unquoted expansions split on IFS."""

    def __init__(self):
        self.words, self.cur, self.at = [], None, False

    def add(self, s, split):
        if not split:
            self.cur = (self.cur or "") + s
            return
        for k, part in enumerate(re.split(r"[ \t\n]+", s)):
            if k:
                self.cut()
            if part:
                self.cur = (self.cur or "") + part

    def cut(self):
        if self.cur is not None:
            self.words.append(self.cur)
            self.cur = None

    def done(self):
        self.cut()
        return self.words


def _brace(raw):
    """Bash's brace expansion of a word (``x={a,b}`` -> ``x=a x=b``; ``{1..3}``), outside quotes and
    ``$``-expansions."""
    i, opens = 0, []
    while i < len(raw):
        c = raw[i]
        j = _skip(raw, i)
        if j is not None:
            i = j
            continue
        if c == "{":
            opens.append((i, []))
        elif c == "," and opens:
            opens[-1][1].append(i)
        elif c == "}" and opens:
            start, commas = opens.pop()
            inner = raw[start + 1:i]
            pre, post = raw[:start], raw[i + 1:]
            if commas:
                cuts = [start] + commas + [i]
                parts = [raw[a + 1:b] for a, b in zip(cuts, cuts[1:])]
                return [w for p in parts for w in _brace(pre + p + post)]
            m = re.match(r"^(-?\d+)\.\.(-?\d+)$", inner)
            if m:
                a, b = int(m.group(1)), int(m.group(2))
                step = 1 if b >= a else -1
                return [w for k in range(a, b + step, step) for w in _brace(pre + str(k) + post)]
        i += 1
    return [raw]


def _glob_re(pat):
    out, i = [], 0
    while i < len(pat):
        c = pat[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and "]" in pat[i + 2:]:
            j = pat.index("]", i + 2)
            body = pat[i + 1:j]
            out.append("[" + ("^" + body[1:] if body[:1] in "!^" else body).replace("\\", "\\\\") + "]")
            i = j
        elif c == "\\" and i + 1 < len(pat):
            i += 1
            out.append(re.escape(pat[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("(?s)" + "".join(out) + r"\Z")


def _trim(v, op, pat):
    g, n = _glob_re(pat), len(v)
    if op in ("#", "##"):
        for k in (range(n, -1, -1) if op == "##" else range(n + 1)):
            if g.match(v[:k]):
                return v[k:]
    else:
        for k in (range(n + 1) if op == "%%" else range(n, -1, -1)):
            if g.match(v[k:]):
                return v[:k]
    return v


def _replace(v, op, pat, rep):
    """``${v/pat/rep}`` (first match), ``//`` (every one), ``/#`` (at the start), ``/%`` (at the end);
    each match the longest, as bash's."""
    if not pat:
        return v
    g, n = _glob_re(pat), len(v)
    if op == "/#":
        for j in range(n, -1, -1):
            if g.match(v[:j]):
                return rep + v[j:]
        return v
    if op == "/%":
        for i in range(n + 1):
            if g.match(v[i:]):
                return v[:i] + rep
        return v
    out, i = [], 0
    while i < n:
        for j in range(n, i, -1):
            if g.match(v[i:j]):
                out.append(rep)
                i = j
                if op == "/":
                    return "".join(out) + v[i:]
                break
        else:
            out.append(v[i])
            i += 1
    return "".join(out)


# ---- arithmetic: $(( )) ------------------------------------------------------------------------
_ATOK = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+#[0-9a-zA-Z@_]+|\d+)|(%s)|"
                   r"(\*\*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%%()<>!~&|^?:,]))" % _NAME)
_BIN = {",": 1, "||": 4, "&&": 5, "|": 6, "^": 7, "&": 8, "==": 9, "!=": 9, "<": 10, "<=": 10, ">": 10,
        ">=": 10, "<<": 11, ">>": 11, "+": 12, "-": 12, "*": 13, "/": 13, "%": 13, "**": 15}


def _num(s):
    if s[:2] in ("0x", "0X"):
        return int(s, 16)
    if "#" in s:
        base, _, digits = s.partition("#")
        return int(digits, int(base))
    if len(s) > 1 and s[0] == "0":
        return int(s, 8)
    return int(s)


def _binop(op, a, b):
    if op in ("/", "%"):
        if b == 0:
            raise ShellError("division by 0")
        q = abs(a) // abs(b)
        q = q if (a >= 0) == (b >= 0) else -q  # C's truncation toward zero, as bash's
        return q if op == "/" else a - b * q
    if op == "**":
        if b < 0:
            raise ShellError("exponent less than 0")
        return a ** b
    return {",": lambda: b, "||": lambda: int(bool(a or b)), "&&": lambda: int(bool(a and b)),
            "|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b, "==": lambda: int(a == b),
            "!=": lambda: int(a != b), "<": lambda: int(a < b), "<=": lambda: int(a <= b),
            ">": lambda: int(a > b), ">=": lambda: int(a >= b), "<<": lambda: a << b, ">>": lambda: a >> b,
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b}[op]()


def arith(expr, var, depth=0):
    """bash's integer arithmetic over ``expr`` (after its ``$`` expansions): C's operators and
    precedence, ``**``, ``?:``, ``0x``/octal/``base#`` numbers; a bare name is ``var(name)``, its value
    evaluated in turn (empty: 0); ``/`` and ``%`` truncate toward zero. Raises ShellError."""
    toks, pos = [], 0
    while expr[pos:].strip():
        m = _ATOK.match(expr, pos)
        if not m:
            raise ShellError("arithmetic syntax error in %r" % expr)
        toks.append(("n", m.group(1)) if m.group(1) else ("v", m.group(2)) if m.group(2) else ("o", m.group(3)))
        pos = m.end()
    at = [0]

    def peek():
        return toks[at[0]] if at[0] < len(toks) else ("e", "")

    def unary():
        t = peek()
        at[0] += 1
        if t == ("o", "("):
            v = binary(0)
            if peek() != ("o", ")"):
                raise ShellError("missing ) in %r" % expr)
            at[0] += 1
            return v
        if t[0] == "o" and t[1] in "-+!~":
            v = unary()
            return {"-": -v, "+": v, "!": int(not v), "~": ~v}[t[1]]
        if t[0] == "n":
            return _num(t[1])
        if t[0] == "v":
            if depth > 16:
                raise ShellError("expression recursion level exceeded")
            s = var(t[1]).strip()
            return arith(s, var, depth + 1) if s else 0
        raise ShellError("operand expected in %r" % expr)

    def binary(minp):
        left = unary()
        while peek()[0] == "o":
            op = peek()[1]
            if op == "?" and minp <= 3:
                at[0] += 1
                a = binary(0)
                if peek() != ("o", ":"):
                    raise ShellError("':' expected in %r" % expr)
                at[0] += 1
                b = binary(3)
                left = a if left else b
                continue
            p = _BIN.get(op)
            if p is None or p < minp:
                break
            at[0] += 1
            left = _binop(op, left, binary(p if op == "**" else p + 1))
        return left

    v = binary(0)
    if at[0] != len(toks):
        raise ShellError("syntax error in expression %r" % expr)
    return v


def _no_cmd(raw):
    """``raw`` with each ``$(command)`` and `` `command` `` replaced by :data:`CMD` (for bash)."""
    out, i, dq = [], 0, False
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            out.append(raw[i:i + 2])
            i += 2
        elif c == "'" and not dq:
            j = _end_squote(raw, i + 1)
            out.append(raw[i:j])
            i = j
        elif c == '"':
            dq = not dq
            out.append(c)
            i += 1
        elif c == "`":
            i = _end_backtick(raw, i + 1)
            out.append(CMD)
        elif raw.startswith("$(", i) and not (raw.startswith("$((", i) and _end_arith(raw, i + 3) is not None):
            i = _end_paren(raw, i + 2)
            out.append(CMD)
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Shell(object):
    """A script's variables, set statement by statement top to bottom, and its words as bash expands
    them (quotes, ``$VAR``/``${VAR...}`` with ``:-``/``-``/``:=``/``:+``/``:?``, ``#``/``%``/``/``
    patterns, case and length forms, arrays and ``"${A[@]}"``/``${A[*]}``, ``$(( ))``, ``~``, brace
    expansion, field splitting on blanks). Commands are never run: ``$(command)`` is :data:`CMD`. A
    variable the script reads unset, with no default operator, stands in as a local path, or a count
    where the name says a scheduler sets it (in ``$(( ))``: 1 for any other name); ``standins`` records
    each (``{name: set of values}``), ``defaulted`` the names read through a default operator. The
    positional parameters are empty (the script runs without arguments); no pathname expansion (no
    file matches in the directory a launch runs from)."""

    def __init__(self):
        self.env = {"HOME": "/tmp/verl-examples/home"}
        self.standins = {}
        self.defaulted = set()
        self.skipped = set()  # names only a branch bash does not take assigns (Branches): empty when read
        self._numeric = 0

    # values
    def get(self, name):
        """A variable's value (element 0 of an array), or None when unset."""
        if name.isdigit():
            return "/tmp/verl-examples/0" if name == "0" else None
        v = self.env.get(name)
        if isinstance(v, list):
            return v[0] if v else None
        return v

    def standin(self, name):
        if _COUNT.search(name):
            v = "8" if "GPU" in name else "1"
        elif self._numeric:
            v = "1"
        else:
            v = "/tmp/verl-examples/%s" % name
        self.standins.setdefault(name, set()).add(v)
        return v

    def value(self, name):
        v = self.get(name)
        if v is None and not name.isdigit():
            return "" if name in self.skipped else self.standin(name)
        return v or ""

    def array(self, name):
        v = self.env.get(name)
        return None if v is None else (list(v) if isinstance(v, list) else [v])

    def arith(self, expr):
        """``$(( expr ))``'s value (a Python int). Raises ShellError."""
        self._numeric += 1
        try:
            text = self.string(expr, dq=True)
            return arith(text, lambda n: self.get(n) if self.get(n) is not None else self.standin(n))
        finally:
            self._numeric -= 1

    def string(self, raw, dq=False):
        """``raw`` expanded to one string (no field splitting)."""
        f = _Fields()
        self._walk(raw, f, dq=dq, split=False, in_param=True)
        return "".join(f.done())

    def words(self, raw):
        """A command word expanded into fields, as bash gives them to the program."""
        out = []
        for w in _brace(raw):
            m = _ASSIGN.match(w)
            f = _Fields()
            self._walk(w, f, tilde=m.end() if m else -1)
            out.extend(f.done())
        return out

    # expansion
    def _walk(self, raw, f, dq=False, split=True, tilde=None, in_param=False):
        i, n = 0, len(raw)
        while i < n:
            c = raw[i]
            if c == "\\":
                nxt = raw[i + 1:i + 2]
                if dq and nxt not in ("$", "`", '"', "\\", "\n"):
                    f.add("\\", False)
                    i += 1
                    continue
                if nxt != "\n":
                    f.add(nxt, False)
                i += 2
            elif c == "'" and not dq:
                j = _end_squote(raw, i + 1)
                f.add(raw[i + 1:j - 1], False)
                i = j
            elif c == "'" and in_param:  # "${X:-'a'}": bash keeps these quotes
                j = _end_squote(raw, i + 1)
                f.add(raw[i:j], False)
                i = j
            elif c == '"' and (not dq or in_param):
                j = _end_dquote(raw, i + 1)
                f.at = False
                self._walk(raw[i + 1:j - 1], f, dq=True, split=False)
                if not f.at:
                    f.add("", False)
                i = j
            elif c == "`":
                i = _end_backtick(raw, i + 1)
                f.add(CMD, split and not dq)
            elif c == "$":
                i = self._dollar(raw, i, f, dq, split)
            elif c == "~" and tilde is not None and not dq and (
                    i == 0 or (tilde >= 0 and (i == tilde or (i > tilde and raw[i - 1] == ":")))) and \
                    raw[i + 1:i + 2] in ("", "/") + ((":",) if tilde >= 0 and i >= tilde else ()):
                f.add(self.value("HOME"), False)
                i += 1
            else:
                f.add(c, split and in_param and not dq)
                i += 1

    def _dollar(self, raw, i, f, dq, split):
        sp = split and not dq
        if raw.startswith("$((", i):
            end = _end_arith(raw, i + 3)
            if end is not None:
                f.add(str(self.arith(raw[i + 3:end - 2])), sp)
                return end
        if raw.startswith("$(", i):
            f.add(CMD, sp)
            return _end_paren(raw, i + 2)
        if raw.startswith("${", i):
            end = _end_brace(raw, i + 2)
            self._param(raw[i + 2:end - 1], f, dq, split)
            return end
        if raw.startswith("$'", i) and not dq:
            end = _end_squote(raw, i + 2)
            f.add(raw[i + 2:end - 1].encode("latin-1", "backslashreplace").decode("unicode_escape"), False)
            return end
        if raw.startswith('$"', i) and not dq:
            return i + 1
        m = re.compile(_NAME).match(raw, i + 1)
        if m:
            f.add(self.value(m.group(0)), sp)
            return m.end()
        c = raw[i + 1:i + 2]
        if c.isdigit():
            f.add(self.value(c), sp)
            return i + 2
        if c == "@":
            f.at = f.at or dq
            return i + 2
        if c == "*":
            if dq:
                f.add("", False)
            return i + 2
        if c in ("#", "?"):
            f.add("0", sp)
            return i + 2
        f.add("$", False)
        return i + 1

    def _param_values(self, name, sub, many):
        """The values ``${name[sub]}`` stands for (a list), None when unset."""
        if name in ("@", "*"):
            return []  # the positional parameters: none
        if many:
            return self.array(name)
        if sub is not None:
            arr, k = self.array(name) or [], self.arith(sub)
            return [arr[k]] if -len(arr) <= k < len(arr) else None
        one = self.get(name)
        return None if one is None else [one]

    def _param_op(self, op, word, vals, dq):
        """``vals`` through a pattern (``#``, ``%``, ``/``), case (``^``, ``,``) or substring (``:``) operator."""
        if op in ("#", "##", "%", "%%"):
            pat = self.string(word, dq)
            return [_trim(v, op, pat) for v in vals]
        if op and op[0] == "/":
            cut = _first_slash(word)
            pat, rep = (word, "") if cut is None else (word[:cut], word[cut + 1:])
            pat, rep = self.string(pat, dq), self.string(rep, dq)
            return [_replace(v, op, pat, rep) for v in vals]
        if op in ("^^", ",,", "^", ","):
            conv = str.upper if op[0] == "^" else str.lower
            return [conv(v) if len(op) == 2 else conv(v[:1]) + v[1:] for v in vals]
        if op == ":":
            off, _, ln = word.partition(":")
            a = self.arith(off)
            if not ln:
                return [v[a:] for v in vals]
            k = self.arith(ln)
            return [v[a:a + k] if k >= 0 else v[a:k] for v in vals]
        return vals

    def _param(self, inner, f, dq, split):
        sp = split and not dq
        m = re.match(r"^(#?)(%s|\d+|[@*])(?:\[([^\]]*)\])?" % _NAME, inner)
        if inner == "#" or not m:
            if inner == "#":
                f.add("0", sp)
                return
            raise ShellError("bad substitution: ${%s}" % inner)
        length, name, sub = m.group(1), m.group(2), m.group(3)
        rest = inner[m.end():]
        many = name in ("@", "*") or sub in ("@", "*")
        star = name == "*" or sub == "*"
        vals = self._param_values(name, sub, many)
        if length:
            f.add(str(len(vals or []) if many else len((vals or [""])[0])), sp)
            return
        op_m = re.match(r"^(:[-=+?]|[-=+?]|##|#|%%|%|//|/#|/%|/|\^\^|\^|,,|,|:)", rest)
        if rest and not op_m:
            raise ShellError("bad substitution: ${%s}" % inner)
        op = op_m.group(0) if op_m else ""
        word = rest[len(op):]
        if op and op[-1] in "-=+" and len(op) <= 2 and op != "//":
            unset = not vals
            test = unset or (op[0] == ":" and not many and vals[0] == "")
            if op[-1] == "+":
                if test:
                    self.defaulted.add(name)
                else:
                    self._walk(word, f, dq, split, in_param=True)
                return
            if test:
                self.defaulted.add(name)
                if op[-1] == "=":
                    v = self.string(word, dq)
                    self.env[name] = v
                    f.add(v, sp)
                else:
                    self._walk(word, f, dq, split, in_param=True)
                return
            op = ""
        if vals is None:
            vals = [self.value(name)] if not many else []
        vals = self._param_op(op, word, vals, dq)
        if not many:
            f.add(vals[0], sp)
        elif star:
            f.add(" ".join(vals), sp)
        else:
            for k, v in enumerate(vals):
                if k:
                    f.cut()
                f.add(v, sp)
            f.at = f.at or dq

    # statements
    def classify(self, tokens):
        """``(kind, tokens)``: kind is "assign" (the statement only sets variables), "declare"
        (``export``/``declare``/``local``... with their words), "unset", "command" or None (a loop or
        ``case`` head, an arithmetic command); the tokens without the leading keywords (and for a
        command, without its one-command ``VAR=value`` prefix)."""
        toks = list(tokens)
        while toks and toks[0][0] == "w" and toks[0][1] in _KEYWORDS:
            toks.pop(0)
        if not toks or (toks[0][0] == "w" and (toks[0][1] in ("for", "case", "select", "function")
                                                or toks[0][1].startswith("(("))):
            return None, toks
        k = 0
        while k < len(toks) and (toks[k][0] == "arr" or _ASSIGN.match(toks[k][1])):
            k += 1
        if k == len(toks):
            return "assign", toks
        word = toks[k][1] if toks[k][0] == "w" else ""
        if word in _DECLARE:
            return "declare", toks[k:]
        if word == "unset":
            return "unset", toks[k:]
        return "command", toks[k:]

    def assign(self, tok):
        """Apply one ``NAME=value``, ``NAME+=value``, ``NAME[i]=value`` or array literal token."""
        if tok[0] == "arr":
            _, name, append, elems = tok
            vals = [w for e in elems for w in self.words(e)]
            self.env[name] = ((self.array(name) or []) if append else []) + vals
            return
        m = _ASSIGN.match(tok[1])
        name, sub, plus = m.group(1), m.group(2), m.group(3)
        f = _Fields()
        self._walk(tok[1][m.end():], f, split=False, tilde=0)
        v = "".join(f.done())
        cur = self.env.get(name)
        if sub is not None or isinstance(cur, list):
            arr = self.array(name) or []
            k = self.arith(sub) if sub is not None else 0
            arr.extend([""] * (k + 1 - len(arr)))
            arr[k] = arr[k] + v if plus else v
            self.env[name] = arr
        else:
            self.env[name] = (cur or "") + v if plus else v

    def run(self, tokens):
        """Apply one statement (a token list of :func:`statements`); return the words of a command that
        runs ``-m ENTRY``, as bash passes them (None for any other statement). Raises ShellError where
        bash would refuse an expansion."""
        kind, toks = self.classify(tokens)
        if kind == "assign":
            for t in toks:
                self.assign(t)
        elif kind == "declare":
            for t in toks[1:]:
                if t[0] == "arr":
                    self.assign(t)
                elif _ASSIGN.match(t[1]):
                    for w in _brace(t[1]):  # export A={a,b}: bash assigns A=a, then A=b
                        self.assign(("w", w))
        elif kind == "unset":
            for t in toks[1:]:
                self.env.pop(t[1], None)
        elif kind == "command" and any(t[0] == "w" and ENTRY in t[1] for t in toks):
            words = [w for t in toks if t[0] == "w" for w in self.words(t[1])]
            if ENTRY in words and words.index(ENTRY) and words[words.index(ENTRY) - 1] == "-m":
                return words
        return None


_VAR_REF = re.compile(r"\$\{?(%s)" % _NAME)
_GLOB = re.compile(r"(?<!\\)[*?\[]")


def _test_value(sh, raw):
    """``raw`` (one word of a test) expanded, or None where the script cannot decide it: a variable
    read unset with no default operator (the user's shell may set it) or ``$(command)``."""
    for m in _VAR_REF.finditer(raw):
        name = m.group(1)
        braced = raw[m.start() + 1:m.start() + 2] == "{"
        after = raw[m.end():m.end() + 2] if braced else ""
        if sh.get(name) is None and not name.isdigit() and not after.startswith((":-", "-", ":=", "=")):
            return None
    if "$(" in raw or "`" in raw:
        return None
    return sh.string(raw)


def decide(sh, words):
    """The truth of an ``if``/``elif`` test (its raw words after the keyword) as bash decides it:
    ``[[ A == B ]]``, ``[[ A != B ]]``, ``[ A = B ]``, ``test A != B``, ``-z A``, ``-n A`` and a
    leading ``!``; True, False, or None for anything else (a file test, a command, a glob pattern, a
    value the script does not set), where both branches are read."""
    w = list(words)
    neg = False
    while w and w[0] == "!":
        neg, w = not neg, w[1:]
    if w and w[0] == "[[" and w[-1] == "]]" or w and w[0] == "[" and w[-1] == "]":
        w = w[1:-1]
    elif w and w[0] == "test":
        w = w[1:]
    else:
        return None
    if w and w[0] == "!":
        neg, w = not neg, w[1:]
    if len(w) == 3 and w[1] in ("==", "=", "!="):
        if _GLOB.search(w[2]):
            return None
        a, b = _test_value(sh, w[0]), _test_value(sh, w[2])
        if a is None or b is None:
            return None
        got = (a == b) if w[1] != "!=" else (a != b)
    elif len(w) == 2 and w[0] in ("-z", "-n"):
        a = _test_value(sh, w[1])
        if a is None:
            return None
        got = (a == "") if w[0] == "-z" else (a != "")
    else:
        return None
    return got != neg


class Branches(object):
    """Which statements of a script bash runs, through its ``if``/``elif``/``else``/``fi``: a branch
    whose test :func:`decide` settles is read or skipped as bash would; a test it cannot settle reads
    every branch (a loop's body is read once). A test joined by ``&&``/``||``/``|`` is undecided."""

    def __init__(self):
        self.frames = []  # [outer branch active, a branch was taken, this branch active]
        self.in_test = False

    def active(self):
        return not self.frames or self.frames[-1][2]

    def _test(self, sh, rest, op):
        """Settle one if/elif test; returns True/False/None."""
        if op in ("&&", "||", "|", "|&"):
            self.in_test = True  # the rest of the test comes in the next statements, up to 'then'
            return None
        return decide(sh, [t[1] for t in rest if t[0] == "w"]) if self.active_outer() else None

    def active_outer(self):
        return not self.frames or self.frames[-1][0]

    def statement(self, sh, toks, op):
        """The statement's tokens bash runs (leading if/then/else/elif/fi consumed), or None when it
        is skipped or only a test."""
        toks = list(toks)
        while toks and toks[0][0] == "w" and toks[0][1] in ("if", "elif", "then", "else", "fi"):
            k = toks.pop(0)[1]
            if k == "then":
                self.in_test = False
            elif k == "if":
                outer = self.active()
                self.frames.append([outer, False, outer])
                v = self._test(sh, toks, op)
                self.frames[-1][1], self.frames[-1][2] = v is True, outer and v is not False
                return None
            elif k == "elif" and self.frames:
                f = self.frames[-1]
                if f[1]:
                    f[2] = False
                    self.in_test = op in ("&&", "||", "|", "|&")
                    return None
                v = self._test(sh, toks, op)
                f[1], f[2] = v is True, f[0] and v is not False
                return None
            elif k == "else" and self.frames:
                f = self.frames[-1]
                f[2] = f[0] and not f[1]
            elif k == "fi" and self.frames:
                self.frames.pop()
        if self.in_test or not self.active():
            self._note_skipped(sh, toks)
            return None
        return toks

    @staticmethod
    def _note_skipped(sh, toks):
        """Names a skipped branch assigns: bash leaves them unset, so they expand empty (not as a
        stand-in for a value the user's shell gives)."""
        k = 1 if toks and toks[0][0] == "w" and toks[0][1] in _DECLARE else 0
        for t in toks[k:]:
            m = _ASSIGN.match(t[1]) if t[0] == "w" else None
            if t[0] == "arr" or m:
                sh.skipped.add(t[1] if t[0] == "arr" else m.group(1))
            else:
                break


def _first_slash(word):
    i = 0
    while i < len(word):
        j = _skip(word, i)
        if j is not None:
            i = j
        elif word[i] == "/":
            return i
        else:
            i += 1
    return None


def _script_text(script):
    return script.replace("\r\n", "\n")


def launch_words(script):
    """The words bash passes to the script's first ``-m verl.trainer.main_ppo`` command, from the
    assignments above it (see :class:`Shell`), or None without one. Raises ShellError where bash
    would refuse the script's quoting or that command's expansions."""
    sh, branches = Shell(), Branches()
    for toks, op in statements(_script_text(script)):
        toks = branches.statement(sh, toks, op)
        if toks is None:
            continue
        try:
            words = sh.run(toks)
        except ShellError:
            if sh.classify(toks)[0] == "command":
                raise
            continue  # an assignment bash refuses leaves the variable as it was
        if words is not None:
            return words
    return None


def launch_of(script):
    """The overrides and --config-name of the script's main_ppo command, or None."""
    try:
        words = launch_words(script)
    except ShellError:
        return None
    if words is None:
        return None
    spec = parse_launch(words[words.index(ENTRY) - 1:])
    name = spec.config_name
    for k, w in enumerate(words):  # the name as the script gives it (parse_launch drops a ".yaml")
        flag, eq, val = w.partition("=")
        if flag in ("--config-name", "-cn"):
            name = val if eq else (words[k + 1] if k + 1 < len(words) else name)
    return {"config_name": name, "config_path": spec.config_path, "overrides": spec.override_texts}


def bash_program(script):
    """Bash text for the same reading of ``script``: the stand-ins :class:`Shell` gave, then the
    script's assignment statements in order (``$(command)`` replaced by :data:`CMD`; ``local`` and
    ``readonly`` as ``declare``), then ``printf '%s\\0'`` of the launch command's words; no other
    command. None without a launch. Raises ShellError where a name stood in both as a path and as a
    number, or was read both unset (a default) and as a stand-in: no one bash run gives both."""
    sh, lines, branches = Shell(), [], Branches()
    for toks, op in statements(_script_text(script)):
        toks = branches.statement(sh, toks, op)
        if toks is None:
            continue
        kind, rest = sh.classify(toks)
        try:
            words = sh.run(toks)
        except ShellError:
            if kind == "command":
                raise
            words = None
        text = " ".join("%s%s=(%s)" % (t[1], "+" if t[2] else "", " ".join(_no_cmd(e) for e in t[3]))
                        if t[0] == "arr" else _no_cmd(t[1]) for t in rest)
        if kind in ("assign", "unset"):
            lines.append(text)
        elif kind == "declare":
            lines.append(re.sub(r"^(local|readonly)\b", "declare", text))
        if words is not None:
            lines.append("printf '%%s\\0' %s" % text)
            both = sorted(n for n, v in sh.standins.items() if len(v) > 1 or n in sh.defaulted)
            if both:
                raise ShellError("stood in two ways: %s" % ", ".join(both))
            pre = ["%s=%s" % (n, shlex.quote(sorted(v)[0])) for n, v in sorted(sh.standins.items())]
            return "\n".join(["HOME=/tmp/verl-examples/home"] + pre + lines) + "\n"
    return None


def bash_words(script, timeout=10.0):
    """What real bash prints for :func:`bash_program` (the launch's words), run from a temp dir with
    only PATH and HOME in its environment; None without a launch. Raises ShellError as
    bash_program, and RuntimeError when bash fails."""
    prog = bash_program(script)
    if prog is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(["bash", "-c", ". /dev/stdin", "/tmp/verl-examples/0"], input=prog.encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=d, timeout=timeout,
                           env={"PATH": "/usr/bin:/bin", "HOME": "/tmp/verl-examples/home", "LC_ALL": "C"})
    if p.returncode != 0 or not p.stdout:
        raise RuntimeError("bash failed (%d): %s" % (p.returncode, p.stderr.decode(errors="replace")[-500:]))
    return p.stdout.decode().split("\0")[:-1]


def check_bash(repo, refs):
    """Print, over the scripts of ``refs`` that run the entry, how many launches' words equal real bash's
    (:func:`bash_words`), differ, or cannot be compared (a name stood in two ways); returns 1 if any differ."""
    counts, seen = {"equal": 0, "differ": 0, "not comparable": 0}, set()
    for ref in refs:
        for path in sorted(git(repo, "ls-tree", "-r", "--name-only", ref, "examples", "recipe").split()):
            script = git(repo, "show", "%s:%s" % (ref, path)) if path.endswith(".sh") else ""
            if ENTRY not in script or script in seen:
                continue
            seen.add(script)
            try:
                mine = launch_words(script)
                if mine is None:
                    continue
                theirs = bash_words(script)
            except (ShellError, RuntimeError) as exc:
                counts["not comparable"] += 1
                print("not comparable: %s:%s: %s" % (ref[:12], path, str(exc)[:200]))
                continue
            counts["equal" if mine == theirs else "differ"] += 1
            if mine != theirs:
                print("differ: %s:%s: %s" % (ref[:12], path, [(a, b) for a, b in zip(mine, theirs) if a != b][:3]))
    print("%d distinct scripts: %s" % (sum(counts.values()), ", ".join("%d %s" % (n, k) for k, n in counts.items())))
    return 1 if counts["differ"] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="verl's git directory")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "verl_example_launches.json"))
    ap.add_argument("--check-bash", action="store_true", help="compare every launch's words with real bash's; "
                                                               "write nothing")
    args = ap.parse_args()
    head = git(args.repo, "rev-parse", "HEAD").strip()
    tags = [t for t in git(args.repo, "tag").split() if re.match(r"^v\d+\.\d+(\.\d+)?(\.post\d+)?$", t)]
    if args.check_bash:
        sys.exit(check_bash(args.repo, tags + [head]))
    launches, seen = [], {}
    for ref in tags + [head]:
        for path in sorted(git(args.repo, "ls-tree", "-r", "--name-only", ref, "examples", "recipe").split()):
            if not path.endswith(".sh"):
                continue
            script = git(args.repo, "show", "%s:%s" % (ref, path))
            got = launch_of(script)
            if got and got["overrides"]:
                key = json.dumps([path, got], sort_keys=True)
                if key in seen:  # the same launch in a later release: one entry, every tag listed
                    seen[key]["refs"].append(ref if ref != head else "HEAD")
                    continue
                seen[key] = dict(got, refs=[ref if ref != head else "HEAD"], path=path)
                launches.append(seen[key])
    doc = {"source": "https://github.com/volcengine/verl examples/**/*.sh and recipe/**/*.sh at each release tag "
                     "and at commit %s (HEAD); only the overrides of their `python3 -m %s` line are kept"
                     % (head, ENTRY),
           "generated_by": "tools/gen_example_launches.py", "launches": launches}
    with open(args.out, "w", encoding="utf-8") as fh:  # one launch per line: a diff shows what changed
        head_doc = json.dumps({k: v for k, v in doc.items() if k != "launches"}, sort_keys=True)
        fh.write(head_doc[:-1] + ', "launches": [\n')
        fh.write(",\n".join(json.dumps(x, sort_keys=True) for x in launches))
        fh.write("\n]}\n")
    print("wrote %d launches (%d overrides, %d distinct) to %s" % (
        len(launches), sum(len(x["overrides"]) for x in launches),
        len({o for x in launches for o in x["overrides"]}), os.path.relpath(args.out, ROOT)))


if __name__ == "__main__":
    main()
