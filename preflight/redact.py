"""Keeps secrets out of everything the tool prints or writes: the one redaction mechanism.

What is hidden (replaced by ``***``):

* by name: the value of a key that names a secret (:func:`is_secret_key`: HF_TOKEN, DB_PASSWORD,
  RAY_REDIS_PASS, WANDB_API_KEY, trainer.wandb_key, aws_secret_access_key; not data.prompt_key,
  reward_fn_key or ppo_max_token_len_per_gpu), in a mapping or in free text in every common form:
  ``KEY=v``, ``KEY: v``, ``'KEY': 'v'``, ``"KEY": "v"`` (JSON, also backslash-escaped inside
  another string), ``--password v``/``--api-key=v``; a quoted value is hidden whole (commas and
  spaces included), an unquoted ``KEY: v`` to the end of its line, an unquoted ``KEY=v`` to the
  next white space;
* by shape: Hugging Face (``hf_``), OpenAI (``sk-``), GitHub (``ghp_``, ``github_pat_``), GitLab
  (``glpat-``), PyPI (``pypi-``), AWS (``AKIA``/``ASIA``), Slack (``xox?-``) tokens, JWTs,
  ``Bearer`` tokens, ``wandb login`` keys, PEM private-key blocks, and URL userinfo
  (``https://user:***@host``, ``https://:***@host``, ``https://***@host``);
* by value: every value that was once hidden by name, and the value of every secret-named
  environment variable of this process (:func:`add_secret`, :func:`collect_environ`), wherever it
  appears later, also URL-encoded. That covers values derived from secrets, such as a resolved
  ``${oc.env:WANDB_API_KEY}`` or a token a target prints bare.

Every pass is linear in the input's length (no pattern can backtrack over a long run: each one is
anchored so that a run of word characters is entered once), so a 100 KB variable costs
milliseconds, not minutes. :func:`redact` is applied to every result by the runner, to every JSON
document and console line, and to the files meant to be shared (locks, environment.json,
Dockerfiles); index credentials are kept out of those files altogether (:func:`strip_userinfo`).
"""

import functools
import os
import re
import threading
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple
from urllib.parse import quote, urlsplit, urlunsplit

__all__ = ["MASK", "redact", "redact_text", "is_secret_key", "add_secret", "collect", "collect_environ",
           "forget_secrets",
           "strip_userinfo", "url_has_userinfo"]

MASK = "***"

# ---- names -------------------------------------------------------------------------------------
# A name is a secret's when its last part is one of _SECRET_LAST (HF_TOKEN, DB_PASSWORD,
# RAY_REDIS_PASS), when it holds one of _SECRET_ANY anywhere (aws_secret_access_key), when its last
# part ends in one of _SECRET_SUFFIX (HFToken, wandbApiKey), or when it ends in "key" after any part
# other than the field-name words of _FIELD_KEY (WANDB_API_KEY, trainer.wandb_key, openai_key are
# secrets; data.prompt_key, reward_fn_key, image_key name dataset columns).
_SECRET_LAST = {"token", "secret", "password", "passwd", "pwd", "pass", "passphrase", "passcode", "credential",
                "credentials", "auth", "authorization", "cookie", "apikey", "accesskey", "secretkey", "privatekey",
                "pat", "sessiontoken", "authtoken", "accesstoken", "refreshtoken", "clientsecret"}
_SECRET_ANY = {"password", "passwd", "secret", "credentials", "apikey", "passphrase"}
_SWITCH = {"disable", "enable", "disabled", "enabled"}
_SECRET_SUFFIX = ("token", "password", "passwd", "secret", "apikey")
_FIELD_KEY = {"prompt", "image", "images", "video", "videos", "audio", "response", "reward", "fn", "label", "labels",
              "answer", "query", "question", "chosen", "rejected", "text", "input", "output", "data", "source",
              "message", "messages", "content", "tool", "tools", "sort", "group", "partition", "hash", "cache",
              "dict", "index", "primary", "foreign", "sample", "uid", "id", "metric", "name", "field", "column",
              "col", "lookup", "map", "sequence", "extra", "info", "ground", "truth", "solution", "instruction",
              "system", "chat", "template", "role", "style", "task", "split", "key", "sort_by", "public",
              "cert", "certificate", "host", "ca"}


def _parts(key: str) -> List[str]:
    key = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)  # wandbApiKey -> wandb_Api_Key
    return [p for p in re.split(r"[^a-z0-9]+", key.lower()) if p]


@functools.lru_cache(maxsize=8192)
def is_secret_key(key: str) -> bool:
    """True when a variable, field or option name says it holds a secret (rules above).

    ``key``: any name, dotted or dashed (``+trainer.wandb_key``, ``--api-key``, ``HF_TOKEN``).
    """
    parts = _parts(key)
    if not parts or parts in (["pwd"], ["oldpwd"]) or _SWITCH.intersection(parts):
        return False  # the shell's working directories; switches (HF_HUB_DISABLE_IMPLICIT_TOKEN=1)
    last = parts[-1]
    if last in _SECRET_LAST or _SECRET_ANY.intersection(parts) or last.endswith(_SECRET_SUFFIX):
        return True
    return last == "key" and len(parts) >= 2 and parts[-2] not in _FIELD_KEY


# ---- values known to be secret -----------------------------------------------------------------
_lock = threading.Lock()
_known: Dict[str, None] = {}
_known_re: Optional["re.Pattern[str]"] = None
_env_done = False
#: Values too common to hide wherever they appear (a secret-named variable set to "true").
_TOO_PLAIN = {"none", "null", "true", "false", "yes", "no", "auto", "empty", "unset", "disabled", "enabled",
              "default", MASK}


#: Bounds that keep the literal pass linear: a longer value is hidden by its name only.
_LONGEST = 1024
_MOST = 512


def add_secret(value: Any) -> None:
    """Hide ``value`` (a string of 4 to 1024 characters; plain words such as ``true`` are ignored)
    wherever it appears in later redactions, also URL-encoded. At most 512 values are kept."""
    global _known_re
    if not isinstance(value, str):
        return
    value = value.strip()
    if not 4 <= len(value) <= _LONGEST or value.lower() in _TOO_PLAIN or MASK in value or len(_known) >= _MOST:
        return
    with _lock:
        new = [v for v in (value, quote(value, safe=""), quote(value)) if v not in _known]
        for v in new:
            _known[v] = None
        if new:
            _known_re = None


def collect_environ(environ: Optional[Mapping[str, str]] = None) -> int:
    """Register the values of the secret-named variables of ``environ`` (default: this process's
    environment) with :func:`add_secret`; returns how many there were."""
    global _env_done
    env = os.environ if environ is None else environ
    n = 0
    for k, v in list(env.items()):
        if v and is_secret_key(k):
            add_secret(v)
            n += 1
    if environ is None:
        _env_done = True
    return n


def forget_secrets() -> None:
    """Forget every registered value (tests); this process's environment is read again on the
    next redaction."""
    global _known_re, _env_done
    with _lock:
        _known.clear()
        _known_re = None
        _env_done = False


def _known_pattern() -> Optional["re.Pattern[str]"]:
    global _known_re
    if not _env_done:
        collect_environ()
    with _lock:
        if _known_re is None and _known:
            _known_re = re.compile("|".join(re.escape(v) for v in sorted(_known, key=len, reverse=True)))
        return _known_re


# ---- shapes ------------------------------------------------------------------------------------
# Each pattern starts with a literal or a \b, and its repeated class cannot restart inside a run it
# already scanned: linear time.
# (literals one of which the text must hold, pattern): the substring test skips a pass cheaply
_SHAPES = [
    (("hf_",), re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    (("sk-",), re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
    (("gh",), re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}")),
    (("github_pat_",), re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}")),
    (("glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    (("pypi-",), re.compile(r"\bpypi-[A-Za-z0-9_-]{16,}")),
    (("AKIA", "ASIA"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (("xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    (("eyJ",), re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")),
]
_AFTER = re.compile(r"(?P<head>\b(?:[Bb]earer|BEARER)[ \t]+|\bwandb login[ \t]+(?:--\S+[ \t]+)*)"
                    r"(?P<val>[A-Za-z0-9._~+/=\-:]{8,})")
# scheme://userinfo@ : the scheme cannot start inside a longer run of scheme characters
_URL = re.compile(r"(?<![A-Za-z0-9+.\-])(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^/\s@?#\"'<>]*)@")
_UNIX_USER = re.compile(r"[a-z_][a-z0-9_.\-]{0,31}\Z")
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_END = "-----END"
# KEY + separator: the key cannot start inside a longer name; the separator is = or : (with an
# optional closing quote of a quoted key before it, backslash-escaped or not), or white space after
# an option (--password v).
_KEY = re.compile(r"(?<![\w.\-])(?P<key>-{0,2}[A-Za-z_][\w.\-]*)"
                  r"(?P<sep>(?:\\?[\"'])?[ \t]*(?P<op>[=:])[ \t]*|(?<=[A-Za-z0-9])[ \t]+(?=[^\s=:]))")
_WS = re.compile(r"\s")
_INNER_ASSIGN = re.compile(r"[A-Za-z_][\w.\-]*=[^=]")
_EOL = re.compile(r"[\r\n]")


def _url(m: "re.Match[str]") -> str:
    info = m.group("info")
    if ":" in info:
        user = info.split(":", 1)[0]
        return "%s%s:%s@" % (m.group("scheme"), user, MASK)
    if not info or info == MASK or _UNIX_USER.match(info):
        return m.group(0)  # ssh://git@host, an empty userinfo
    return "%s%s@" % (m.group("scheme"), MASK)  # https://TOKEN@host


def _value_end(s: str, p: int, op: str, flag: bool) -> Tuple[int, int]:
    """(start, end) of the value that begins at ``p``: a quoted one to its closing quote, else to
    the end of the line (after ``:``) or of the word (after ``=`` or an option)."""
    n = len(s)
    if p < n and s[p] == "\\" and p + 1 < n and s[p + 1] in "\"'":
        close = s.find("\\" + s[p + 1], p + 2)
        start = p + 2
    elif p < n and s[p] in "\"'":
        q = s[p]
        start = p + 1
        close = start
        while True:
            close = s.find(q, close)
            if close < 0:
                break
            if s[close - 1] != "\\":
                break
            close += 1
    else:
        start = p
        m = (_EOL if op == ":" and not flag else _WS).search(s, p)
        return start, m.start() if m else n
    if close < 0:
        m = _EOL.search(s, start)
        close = m.start() if m else n
    return start, close


def _assignments(s: str, collect: bool) -> str:
    out: List[str] = []
    pos = 0
    i = 0
    n = len(s)
    while i < n:
        m = _KEY.search(s, i)
        if m is None:
            break
        key, op = m.group("key"), m.group("op")
        flag = op is None
        if flag and not key.startswith("-"):
            i = m.end("key")  # "word word" is no assignment
            continue
        if not is_secret_key(key):
            i = m.end("key") if flag else m.end()
            continue
        start, end = _value_end(s, m.end(), op or "", flag)
        val = s[start:end]
        if flag and _INNER_ASSIGN.match(val):
            i = m.end()  # --secret id=netrc,src=FILE: the value is itself assignments, looked at next
            continue
        if val and val != MASK:
            if collect:
                add_secret(val)
            else:
                out.append(s[pos:start])
                out.append(MASK)
                pos = end
        i = max(end, m.end())
    if collect:
        return s
    out.append(s[pos:])
    return "".join(out)


#: Every secret name holds one of these (lower case): a text without any has no KEY=v to mask.
_NAME_HINTS = ("token", "secret", "pass", "pwd", "key", "auth", "cred", "cookie", "pat")


def _may_assign(s: str) -> bool:
    if "=" not in s and ":" not in s and "-" not in s:
        return False
    low = s.lower()
    return any(h in low for h in _NAME_HINTS)


def _pem(s: str) -> str:
    out = []
    pos = 0
    for m in _PEM_BEGIN.finditer(s):
        if m.start() < pos:
            continue
        end = s.find(_PEM_END, m.end())
        end = len(s) if end < 0 else end
        out.append(s[pos:m.end()])
        out.append("\n%s\n" % MASK)
        pos = end
    out.append(s[pos:])
    return "".join(out)


def redact_text(s: str) -> str:
    """``s`` with every secret it holds replaced by ``***`` (see the module docstring); linear time."""
    if not s:
        return s
    known = _known_pattern()
    if known is not None:
        s = known.sub(MASK, s)
    if "PRIVATE KEY-----" in s:
        s = _pem(s)
    if "://" in s:
        s = _URL.sub(_url, s)
    if _may_assign(s):
        s = _assignments(s, collect=False)
    for needles, pat in _SHAPES:
        if any(n in s for n in needles):
            s = pat.sub(MASK, s)
    if "earer" in s or "EARER" in s or "wandb login" in s:
        s = _AFTER.sub(lambda m: m.group("head") + MASK, s)
    return s


def _collect(value: Any, key: str = "") -> None:
    """Register the values hidden by name anywhere in ``value`` (first pass of :func:`redact`)."""
    if key and is_secret_key(key):
        if isinstance(value, dict):
            value = list(value.values())
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(v, (dict, list, tuple)):
                _collect(v, key)
            else:
                add_secret(v)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _collect(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v)
    elif isinstance(value, str) and _may_assign(value):
        _assignments(value, collect=True)


def collect(value: Any) -> None:
    """Register every value hidden by name anywhere in ``value`` (nested dicts, lists, texts with
    ``KEY=v``), so that redacting the parts of a document one by one, in any order, hides each
    of them everywhere. Call it on the whole document first."""
    _collect(value)


def _mask(value: Any, key: str = "") -> Any:
    if key and is_secret_key(key) and value not in (None, "", [], {}) and not isinstance(value, bool):
        return MASK
    if isinstance(value, dict):
        return {k: _mask(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mask(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact(value: Any, key: str = "") -> Any:
    """A copy of ``value`` (dicts, lists, tuples as lists, strings, scalars) with every secret
    replaced by ``***``. ``key``: the name ``value`` is stored under, if any.

    Two passes: the first registers every value hidden by name (:func:`add_secret`), so the
    second hides it also where it appears elsewhere in ``value`` (or in any later redaction).
    A secret-named key with a bool value keeps it (``use_auth: true``).
    """
    _collect(value, key)
    return _mask(value, key)


# ---- index credentials -------------------------------------------------------------------------
def url_has_userinfo(url: str) -> bool:
    """True when ``url`` carries a user name or password (``https://u:pw@host/simple``)."""
    try:
        return "@" in (urlsplit(url).netloc or "")
    except ValueError:
        return False


def strip_userinfo(url: str) -> str:
    """``url`` without its userinfo (``https://u:pw@host/x`` -> ``https://host/x``), for files meant
    to be shared (locks, environment.json, images); the user passes the credentials to pip
    another way (see README, "Index credentials"). A URL that does not parse is returned masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    if "@" not in (parts.netloc or ""):
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def strip_all(urls: Iterable[str]) -> List[str]:
    """:func:`strip_userinfo` of each URL."""
    return [strip_userinfo(u) for u in urls]
