"""Keeps secrets out of everything the tool prints or writes: the one redaction mechanism.

What is hidden (replaced by ``***``):

* by name: the value of a key that names a secret (:func:`is_secret_key`, plurals too: HF_TOKEN,
  hf_tokens, api_keys, secrets, DB_PASSWORD,
  RAY_REDIS_PASS, WANDB_API_KEY, trainer.wandb_key, aws_secret_access_key; not data.prompt_key,
  reward_fn_key or ppo_max_token_len_per_gpu), in a mapping or in free text in every common form:
  ``KEY=v``, ``KEY: v``, ``'KEY': 'v'``, ``"KEY": "v"`` (JSON, also backslash-escaped inside
  another string), ``--password v``/``--api-key=v``; a quoted value is hidden whole (commas and
  spaces included), an unquoted ``KEY: v`` to the end of its line, an unquoted ``KEY=v`` to the
  next white space;
* by shape: Hugging Face (``hf_``, ``hf_oauth_``), OpenAI and Anthropic (``sk-``), GitHub (``ghp_``,
  ``github_pat_``), GitLab (``glpat-``), PyPI (``pypi-``), AWS (``AKIA``/``ASIA``), Slack (``xox?-``),
  Stripe (``sk_live_``, ``rk_live_``), Google API (``AIza``), npm (``npm_``), Replicate (``r8_``),
  DigitalOcean (``dop_v1_``), SendGrid (``SG.x.y``), Google OAuth (``ya29.``, ``GOCSPX-``), Groq,
  Grafana, Shopify, Stripe webhook, Linear, Docker, Perplexity, GitLab runner/deploy, Slack app,
  Vault (``hvs.``) and age (``AGE-SECRET-KEY-1``) tokens, JWTs,
  ``Bearer`` tokens, ``wandb login`` keys, PEM private-key blocks, URL userinfo (all of it, to the
  last ``@`` of the authority, on http(s)/ray/redis URLs: ``https://***@host``; the password of
  other schemes: ``s3://user:***@host``; ``ssh://git@host`` stays), ``curl -u user:***``,
  ``mysql -p***``, ``<password>***</password>``, NVIDIA API keys (``nvapi-``);
* in prose: the word after ``password``/``passwd``/``passphrase`` and a blank (``password hunter2``,
  ``passwd abc``), unless that word is a common word of prose (:data:`_PROSE_AFTER`: ``password
  reset``, ``the password is required``, ``password for root``) or starts with punctuation (an
  aside in brackets): a value is hidden, a sentence about passwords stays readable;
* in the forms ``('KEY', 'v')`` and ``['--api-key', 'v']`` (a quoted name, a comma, a quoted value),
  YAML blocks (``key: |`` or ``key:`` followed by deeper-indented lines: all of them hidden), and
  with any blank but a line end around the separator (a no-break space too);
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

__all__ = ["MASK", "redact", "redact_text", "is_secret_key", "secret_strength", "plainly_secret", "plain_value", "hides", "add_secret", "collect", "collect_environ",
           "forget_secrets",
           "strip_userinfo", "url_has_userinfo", "url_has_secret"]

MASK = "***"

# ---- names -------------------------------------------------------------------------------------
# A name is a secret's when its last part (made singular: keys, tokens, secrets, passwords) is one
# of _SECRET_LAST (HF_TOKEN, DB_PASSWORD, RAY_REDIS_PASS, api_tokens), when it holds one of
# _SECRET_ANY anywhere (aws_secret_access_key), when its last part ends in one of _SECRET_SUFFIX
# (HFToken, wandbApiKey), or when it ends in "key"/"keys" after any part other than the field-name
# words of _FIELD_KEY (WANDB_API_KEY, trainer.wandb_key, openai_key are secrets; data.prompt_key,
# reward_fn_key, image_key name dataset columns). A plural "tokens" after a counting or content
# word (max_tokens, max_new_tokens, special_tokens) is a count or a list of words, not a secret.
#
# Any part "auth" makes a name strong (SSH_AUTH_SOCK, auth_header, use_auth_token).
#
# Names are strong or weak (:func:`secret_strength`). A strong name says what it holds: api,
# secret, token, password, auth, credential (api_key, HF_TOKEN, secret_key). A weak one only ends
# in key(s) or tokens (wandb_key, num_cpus_key, hf_tokens): its value is hidden unless it is
# plainly no secret (:func:`plain_value`: null, a bool, a number, a lower-case word, a dotted config
# path such as ``ray_kwargs.ray_init.num_cpus``), so a field that names a config key stays visible.
_SECRET_LAST = {"token", "secret", "password", "passwd", "pwd", "pass", "passphrase", "passcode", "credential",
                "credentials", "auth", "authorization", "cookie", "apikey", "accesskey", "secretkey", "privatekey",
                "pat", "sessiontoken", "authtoken", "accesstoken", "refreshtoken", "clientsecret", "pw", "cred",
                "creds"}
#: A request's signature (X-Amz-Signature, webhook_sig) is a credential; a bare "signature" (the
#: tool's own evidence field) or a function's or type's is not.
_SIGNATURE = {"signature", "sig"}
_CODE_SIGNATURE = {"function", "fn", "type", "method", "call", "model", "schema", "tool", "api"}
_SECRET_ANY = {"password", "passwords", "passwd", "secret", "secrets", "credentials", "apikey", "apikeys",
               "passphrase", "auth"}
_SWITCH = {"disable", "enable", "disabled", "enabled"}
_SECRET_SUFFIX = ("token", "password", "passwd", "secret", "apikey")
#: Words before "key"/"keys" that make the name strong (api_key, private_keys).
_STRONG_KEY = {"api", "secret", "private", "access", "auth", "token", "password", "credential", "ssh",
               "encryption", "signing", "client", "session"}
#: Words before a plural "tokens" that make it a count or a list of words (max_tokens).
_COUNT_TOKENS = {"max", "min", "num", "new", "total", "prompt", "response", "input", "output", "special", "stop",
                 "bad", "pad", "extra", "added", "generated", "gen", "completion", "context", "reasoning", "cached",
                 "image", "vision", "audio", "video", "eos", "bos", "vocab", "per", "batched", "thinking", "n",
                 "skip", "sample", "sampled", "masked", "valid", "loss", "seq", "sequence", "text", "think", "tool", "answer", "all",
                 "target", "draft", "speculative", "lookahead", "unk", "sep", "mask", "allowed", "banned", "logit"}
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


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        base = word[:-1]
        if base == "key" or base in _SECRET_LAST or base.endswith(_SECRET_SUFFIX) or base.endswith("key"):
            return base
    return word


@functools.lru_cache(maxsize=8192)
def secret_strength(key: str) -> int:
    """How surely the name ``key`` holds a secret: 2 (strong: its value is always hidden), 1 (weak:
    hidden unless :func:`plain_value`), 0 (no secret). Rules in the comment above."""
    parts = _parts(key)
    if not parts or parts in (["pwd"], ["oldpwd"]) or _SWITCH.intersection(parts):
        return 0  # the shell's working directories; switches (HF_HUB_DISABLE_IMPLICIT_TOKEN=1)
    raw = parts[-1]
    last = _singular(raw)
    prev = parts[-2] if len(parts) >= 2 else ""
    if last == "key":
        if raw == "keys" and len(parts) == 1:
            return 0  # a bare "keys" (a list of names)
        if prev in _STRONG_KEY or _SECRET_ANY.intersection(parts):
            return 2
        return 1 if len(parts) >= 2 and prev not in _FIELD_KEY else 0
    if last != raw and last.endswith("token") and last != "token" or last == "token" and raw == "tokens":
        if prev in _COUNT_TOKENS or len(parts) == 1:
            return 0  # max_tokens, special_tokens; a bare "tokens"
        return 2 if prev in _STRONG_KEY else 1
    if last in _SECRET_LAST or _SECRET_ANY.intersection(parts) or last.endswith(_SECRET_SUFFIX):
        return 2
    if last in _SIGNATURE and len(parts) >= 2 and prev not in _CODE_SIGNATURE:
        return 2
    return 0


def plainly_secret(key: str) -> bool:
    """True when the name ``key`` says outright that it holds a secret (a strong name, see
    :func:`secret_strength`: ``password``, ``api_key``, ``..._token``, ``SSH_AUTH_SOCK``), not merely
    that it ends in ``key`` (``data.prompt_key``) or holds ``token`` inside
    (``ppo_max_token_len_per_gpu``). Launch preflight hides the string value of one of verl's own
    config keys only when this is true of its last part."""
    return secret_strength(key) == 2


def is_secret_key(key: str) -> bool:
    """True when a variable, field or option name may hold a secret (strong or weak, see
    :func:`secret_strength`; a weak one's value is hidden only when it is not :func:`plain_value`).

    ``key``: any name, dotted or dashed (``+trainer.wandb_key``, ``--api-key``, ``HF_TOKEN``).
    """
    return secret_strength(key) > 0


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\Z")
_WORD = re.compile(r"[a-z][a-z_]{0,63}\Z")
_CONFIG_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+\Z")


def plain_value(value: Any) -> bool:
    """True when ``value`` is plainly no secret: None, a bool, a number (also as text), a list of
    numbers (token ids such as ``sample_tokens``), ``null``,
    a lower-case word without digits (``images``, ``data_source``) or a dotted config path of at
    most 128 characters (``ray_kwargs.ray_init.num_cpus``)."""
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, (list, tuple)):  # token ids, shapes, counts: numbers only, never text
        return all(v is None or isinstance(v, (bool, int, float)) for v in value)
    if not isinstance(value, str):
        return False
    v = value.strip()
    if v.lower() in ("", "null", "none", "~", "true", "false"):
        return True
    return bool(_NUMBER.match(v) or _WORD.match(v) or (len(v) <= 128 and _CONFIG_PATH.match(v)))


def hides(key: str, value: Any) -> bool:
    """True when ``value``, stored under the name ``key``, is a secret by its name (strong, or weak
    and not :func:`plain_value`)."""
    n = secret_strength(key) if key else 0
    return n == 2 or (n == 1 and not plain_value(value))


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
    (("hf_",), re.compile(r"\bhf_(?:oauth_)?[A-Za-z0-9]{20,}")),
    (("sk-",), re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
    (("gh",), re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}")),
    (("github_pat_",), re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}")),
    (("glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    (("pypi-",), re.compile(r"\bpypi-[A-Za-z0-9_-]{16,}")),
    (("AKIA", "ASIA"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (("xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    (("eyJ",), re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")),
    (("k_live_", "k_test_"), re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    (("AIza",), re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    (("npm_",), re.compile(r"\bnpm_[A-Za-z0-9]{30,}")),
    (("r8_",), re.compile(r"\br8_[A-Za-z0-9]{30,}")),
    (("_v1_",), re.compile(r"\bdo[opr]_v1_[a-f0-9]{40,}")),
    (("SG.",), re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")),
    (("ya29.",), re.compile(r"\bya29\.[A-Za-z0-9_-]{20,}")),
    (("GOCSPX-",), re.compile(r"\bGOCSPX-[A-Za-z0-9_-]{20,}")),
    (("gsk_", "glsa_", "shpat_", "whsec_", "lin_api_", "dckr_pat_", "pplx-", "glrt-", "gldt-", "xapp-"),
     re.compile(r"\b(?:gsk_|glsa_|shpat_|whsec_|lin_api_|dckr_pat_|pplx-|glrt-|gldt-|xapp-)[A-Za-z0-9_-]{20,}")),
    (("hvs.",), re.compile(r"\bhvs\.[A-Za-z0-9_-]{20,}")),
    # webhook and bot URLs whose path is the credential, and an Azure SAS signature
    (("hooks.slack.com/",), re.compile(r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/_-]{10,}")),
    (("/api/webhooks/",), re.compile(r"(?<=/api/webhooks/)\d+/[A-Za-z0-9_-]{20,}")),
    (("api.telegram.org/bot",), re.compile(r"(?<=api\.telegram\.org/bot)\d+:[A-Za-z0-9_-]{20,}")),
    (("sig=",), re.compile(r"(?<=[?&]sig=)[A-Za-z0-9%+/=]{16,}")),
    (("AGE-SECRET-KEY-1",), re.compile(r"\bAGE-SECRET-KEY-1[0-9A-Z]{20,}")),
    (("nvapi-",), re.compile(r"\bnvapi-[A-Za-z0-9_-]{20,}")),  # NVIDIA API keys (build.nvidia.com, NGC)
]
# the word after "password" in prose (password hunter2): the keyword is a whole word, its value one
# run of non-blanks after blanks (no line end): linear
_PROSE = re.compile(r"(?<![\w\-])(?P<head>(?:[Pp]ass(?:word|wd|phrase)|PASS(?:WORD|WD|PHRASE))[^\S\r\n]+)"
                    r"(?P<val>[^\s\"'`]+)")
#: Words that follow "password" in sentences, not values: never hidden (lower case, trailing
#: punctuation ignored).
_PROSE_AFTER = frozenset("""
a about above after again against all an and any are as at be been before being below between but by
can cannot change changed changes could did do does expired expires field file for from given had has
have hash hashes here how if in incorrect into invalid is it its manager may mismatch missing must
needed new no not of off old on once only or other our out over please policy prompt protected
provided required reset rules set should so than that the their then there these this those to too
under until updated used uses using via was we were what when where which while who will with
without wrong you your login authentication prompts stored storage length characters check never always
hidden masked itself
""".split())

_AFTER = re.compile(r"(?P<head>\b(?:[Bb]earer|BEARER)[ \t]+|\bwandb login[ \t]+(?:--\S+[ \t]+)*)"
                    r"(?P<val>[A-Za-z0-9._~+/=\-:]{8,})")
# scheme://userinfo@ : the scheme cannot start inside a longer run of scheme characters
# (the userinfo runs to the LAST @ of the authority: pip splits there, so a password may hold one)
_URL = re.compile(r"(?<![A-Za-z0-9+.\-])(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^/\s?#\"'<>]*)@")
#: Schemes whose userinfo is always a credential, a user name too (https://TOKEN@pypi.fury.io).
_SECRET_SCHEMES = ("http", "https", "ray", "redis", "rediss")
_UNIX_USER = re.compile(r"[a-z_][a-z0-9_.\-]{0,31}\Z")
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = "-----END"
# KEY + separator: the key cannot start inside a longer name; the separator is = or : (with an
# optional closing quote of a quoted key before it, backslash-escaped or not), or white space after
# an option (--password v).
# A quoted key followed by a comma and a quoted value is a pair too: ('HF_TOKEN', 'v'),
# ['--api-key', 'v']. Blanks are any white space but line ends (a no-break space too).
_KEY = re.compile(r"(?<![\w.\-])(?P<key>-{0,2}[A-Za-z_][\w.\-]*)"
                  r"(?P<sep>(?:\\?[\"'])?[^\S\r\n]*(?P<op>[=:])[^\S\r\n]*"
                  r"|\\?[\"'][^\S\r\n]*(?P<comma>,)[^\S\r\n]*(?=\\?[\"'\[({])"
                  r"|(?<=[A-Za-z0-9])[^\S\r\n]+(?=[^\s=:]))")
_BLOCK = re.compile(r"[|>][-+0-9]*[^\S\r\n]*(?:#[^\r\n]*)?\Z")
# a YAML key whose value is on the next lines, after a comment, a tag (!!seq) or an anchor (&pw)
_YAML_LEAD = re.compile(r"(?:[!&][^\s]*[^\S\r\n]*)*(?:#[^\r\n]*)?\Z")
# a call as the value: HTTPBasicAuth(, requests.auth.HTTPBasicAuth(, dict(
_CALL = re.compile(r"[A-Za-z_][\w.]*\(")
# curl -u user:password, --user, --proxy-user: the part after the first colon
_USER_OPT = re.compile(r"(?<![\w\-])(?P<head>(?:-u|-U|--user|--proxy-user)(?:[^\S\r\n]+|=)[\"']?[^\s:\"']*:)"
                       r"(?P<val>[^\s\"']+)")
# mysql -pPASSWORD (and mysqldump, mariadb, sshpass): a password glued to -p, on such a line
_GLUED_P_CMD = re.compile(r"\b(?:mysql\w*|mariadb[\w\-]*|sshpass)\b")
_GLUED_P = re.compile(r"(?<!\S)-p(?P<val>[^\s\"']+)")
# <password>v</password>, <api_key attr="x">v</api_key>
_XML = re.compile(r"<(?P<tag>[A-Za-z_][\w.\-:]*)(?:\s[^<>]*)?>(?P<val>[^<]*)</")
_WS = re.compile(r"\s")
_INNER_ASSIGN = re.compile(r"[A-Za-z_][\w.\-]*=[^=]")
_EOL = re.compile(r"[\r\n]")


def _url(m: "re.Match[str]") -> str:
    info = m.group("info")
    scheme = m.group("scheme")[:-3].lower().rsplit("+", 1)[-1]
    if info and info != MASK and scheme in _SECRET_SCHEMES:
        return "%s%s@" % (m.group("scheme"), MASK)
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


def _block_end(s: str, eol: int, line_start: int) -> int:
    """End of the lines after ``eol`` indented deeper than the line at ``line_start`` (a YAML
    block scalar or nested list under a key), blank lines included; ``eol`` when there are none."""
    n = len(s)
    indent = 0
    while line_start + indent < n and s[line_start + indent] in " \t":
        indent += 1
    end = eol
    p = eol
    while p < n and s[p] in "\r\n":
        q = p + 1 if not (s[p] == "\r" and p + 1 < n and s[p + 1] == "\n") else p + 2
        k = q
        while k < n and s[k] in " \t":
            k += 1
        if k < n and s[k] not in "\r\n" and k - q <= indent and not (
                k - q == indent and s[k] == "-" and (k + 1 >= n or s[k + 1] in " \t\r\n")):
            break  # a shallower line ends it; "- item" at the key's own indent is YAML's list under it
        m = _EOL.search(s, k)
        p = m.start() if m else n
        if k < n and s[k] not in "\r\n":
            end = p
    return end


_OPEN = {"[": "]", "{": "}", "(": ")"}
#: The longest bracketed value followed to its close (characters): past it, the mask runs to there.
_BRACKET_MOST = 20000
#: A bracketed list of numbers only (token ids, a shape): no secret, under a weak name.
_NUMBER_LIST = re.compile(r"[\[({][\s\d.,+\-eE\[\](){}]*[\])}]\Z")


def _escaped(s: str, k: int) -> bool:
    """True when ``s[k]`` follows an odd number of backslashes."""
    b = 0
    while k - b - 1 >= 0 and s[k - b - 1] == "\\":
        b += 1
    return b % 2 == 1


def _bracket_end(s: str, p: int) -> int:
    """End (exclusive) of the bracketed value that opens at ``s[p]`` (``[``, ``{`` or ``(``):
    after its matching close, nesting followed across lines, and a quoted string skipped when it
    closes on the same line (an apostrophe without its pair is a plain character; backslash-escaped
    quotes, as in JSON inside a string, are plain too); at most :data:`_BRACKET_MOST` characters
    on (an unclosed one is masked that far)."""
    n = min(len(s), p + _BRACKET_MOST)
    stack = []
    k = p
    while k < n:
        c = s[k]
        if c in "\"'" and not _escaped(s, k):
            eol = _EOL.search(s, k)
            stop = min(n, eol.start() if eol else n)
            q = s.find(c, k + 1, stop)
            while q > 0 and _escaped(s, q):
                q = s.find(c, q + 1, stop)
            if q > 0:
                k = q + 1
                continue
        elif c in _OPEN:
            stack.append(_OPEN[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return k + 1
        k += 1
    return n


def _assignments(s: str, collect: bool) -> str:
    out: List[str] = []
    pos = 0
    i = 0
    n = len(s)
    line_start, scanned = 0, 0
    while i < n:
        m = _KEY.search(s, i)
        if m is None:
            break
        key, op = m.group("key"), m.group("op") or m.group("comma")
        flag = op is None
        if flag and not key.startswith("-"):
            i = m.end("key")  # "word word" is no assignment
            continue
        strength = secret_strength(key)
        if not strength:
            i = m.end("key") if flag else m.end()
            continue
        start, end = _value_end(s, m.end(), op if op == ":" else "=", flag)
        first = m.end()
        while first < n and s[first] in " \t":
            first += 1
        if s.startswith(MASK, first) and (first + len(MASK) >= n or not s[first + len(MASK)].isalnum()):
            i = first + len(MASK)  # already hidden (a known value replaced first): nothing more to take
            continue
        call = _CALL.match(s, first) if first < n else None
        if first < n and s[first] in _OPEN:  # key: [..], key = ('user', 'pw'), "key": {..}, --keys [..]
            start, end = first, _bracket_end(s, first)
        elif call and not flag:  # auth=HTTPBasicAuth("user", "pw"): the whole call
            start, end = first, _bracket_end(s, call.end() - 1)
        val = s[start:end]
        if flag and _INNER_ASSIGN.match(val):
            i = m.end()  # --secret id=netrc,src=FILE: the value is itself assignments, looked at next
            continue
        if op == ":" and (not val.strip() or _BLOCK.match(val) or _YAML_LEAD.match(val)) and end < n:
            nl = s.rfind("\n", scanned, m.start())
            if nl >= 0:
                line_start = nl + 1
            scanned = max(scanned, m.start())
            end = _block_end(s, end, line_start)  # key: |\n  value, key:\n  - value
            val = s[start:end]
        if val.strip() and val != MASK and (strength == 2 or not (plain_value(val) or _NUMBER_LIST.match(val.strip()))):
            if collect:
                add_secret(val)
                if end - start > len(val.strip()) or "\n" in val:
                    for line in val.splitlines():
                        add_secret(line.strip().lstrip("-").strip())
            else:
                out.append(s[pos:start])
                out.append(MASK)
                pos = end
        i = max(end, m.end())
    if collect:
        return s
    out.append(s[pos:])
    return "".join(out)


def _glued(s: str) -> str:
    """``s`` with the passwords of ``curl -u user:pw`` and ``mysql -ppw`` masked."""
    if "-u" in s or "-U" in s or "user" in s:
        s = _USER_OPT.sub(lambda m: m.group("head") + MASK, s)
    if "-p" in s and _GLUED_P_CMD.search(s):
        out = []
        for line in s.splitlines(True):
            out.append(_GLUED_P.sub("-p" + MASK, line) if _GLUED_P_CMD.search(line) else line)
        s = "".join(out)
    if "</" in s:
        s = _XML.sub(lambda m: (m.group(0)[:m.start("val") - m.start()] + MASK + "</")
                     if m.group("val").strip() and m.group("val") != MASK and hides(m.group("tag"), m.group("val"))
                     else m.group(0), s)
    return s


#: Every secret name holds one of these (lower case): a text without any has no KEY=v to mask.
_NAME_HINTS = ("token", "secret", "pass", "pw", "key", "auth", "cred", "cookie", "pat", "sig")


def _may_assign(s: str) -> bool:
    if "=" not in s and ":" not in s and "-" not in s and "," not in s:
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
    if "PRIVATE KEY-----" in s or "PRIVATE KEY BLOCK-----" in s:
        s = _pem(s)
    if "://" in s:
        s = _URL.sub(_url, s)
    if _may_assign(s):
        s = _assignments(s, collect=False)
    s = _glued(s)
    for needles, pat in _SHAPES:
        if any(n in s for n in needles):
            s = pat.sub(MASK, s)
    if "earer" in s or "EARER" in s or "wandb login" in s:
        s = _AFTER.sub(lambda m: m.group("head") + MASK, s)
    if "ass" in s or "ASS" in s:
        s = _PROSE.sub(_prose, s)
    return s


def _prose(m: "re.Match[str]") -> str:
    val = m.group("val")
    word = val.rstrip(".,;:!?)").lower()
    if val == MASK or not word or not word[0].isalnum() or word in _PROSE_AFTER:
        return m.group(0)
    return m.group("head") + MASK


def _collect(value: Any, key: str = "") -> None:
    """Register the values hidden by name anywhere in ``value`` (first pass of :func:`redact`)."""
    if key and is_secret_key(key) and (isinstance(value, (dict, list, tuple)) or hides(key, value)):
        if isinstance(value, dict):
            value = list(value.values())
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(v, (dict, list, tuple)):
                _collect(v, key)
            elif hides(key, v):
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
    if key and value not in (None, "", [], {}) and not isinstance(value, bool) and hides(key, value):
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


#: Query parameters that carry a credential though their name is no secret's (Azure SAS ``sig``).
_QUERY_SECRETS = ("sig", "signature", "key", "code")


def _secret_param(name: str) -> bool:
    from urllib.parse import unquote_plus

    name = unquote_plus(name)
    return is_secret_key(name) or name.lower() in _QUERY_SECRETS


def _mask_query(query: str) -> str:
    """``query`` with the value of every secret-named parameter (``token``, ``private_token``,
    ``access_token``, ``X-Amz-Signature``, ``sig``) as ``***``; the rest byte for byte."""
    out = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        out.append("%s=%s" % (name, MASK) if eq and value and value != MASK and _secret_param(name) else part)
    return "&".join(out)


def url_has_secret(url: str) -> bool:
    """True when ``url`` carries a credential: a user name or password, or a secret-named query
    parameter (``https://h/simple?token=...``): :func:`strip_userinfo` hides it in a shared file,
    so the run that needs it passes the real URL to pip through its environment."""
    return url_has_userinfo(url) or strip_userinfo(url) != url


def strip_userinfo(url: str) -> str:
    """``url`` without its userinfo (``https://u:pw@host/x`` -> ``https://host/x``) and with the
    values of secret-named query parameters masked (``?token=***``), for files meant to be shared
    (locks, environment.json, images); the user passes the credentials to pip another way (see
    README, "Index credentials"). A URL that does not parse is returned masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    query = _mask_query(parts.query) if parts.query else parts.query
    if "@" not in (parts.netloc or "") and query == parts.query:
        return url
    host = parts.netloc.rsplit("@", 1)[1] if "@" in (parts.netloc or "") else parts.netloc
    return urlunsplit((parts.scheme, host, parts.path, query, parts.fragment))


def strip_all(urls: Iterable[str]) -> List[str]:
    """:func:`strip_userinfo` of each URL."""
    return [strip_userinfo(u) for u in urls]
