"""Keeps secrets out of every report.

A value is hidden when its key names a secret (token, password, secret, credential, auth,
cookie, a name ending in key) or when the value itself looks like one (Hugging Face, OpenAI, GitHub, AWS,
W&B tokens, URLs with user:password). Applied by the runner to every result before rendering.
"""

import re
from typing import Any

__all__ = ["redact", "is_secret_key"]

_SECRET_PARTS = {"token", "secret", "password", "passwd", "pwd", "credential", "credentials", "auth",
                 "cookie", "apikey", "passphrase"}
_VALUE = [
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[baprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"(?<=wandb login )\S+", re.IGNORECASE),
]
# KEY=value or KEY: value inside free text (command lines, overrides, logs): masked when KEY names
# a secret. The key may be dotted (ray_kwargs...env_vars.WANDB_API_KEY=...).
_ASSIGN = re.compile(r"(?P<key>[A-Za-z_][\w.\-]*)(?P<sep>\s*[=:]\s*)(?P<quote>['\"]?)(?P<val>[^\s'\",;]+)")
_URL_CRED = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/\s:@]+):(?P<pw>[^/\s@]+)@", re.IGNORECASE)
MASK = "***"


def is_secret_key(key: str) -> bool:
    """True when a variable or field name says it holds a secret: one of its ``_``/``-``/``.``
    separated parts is token, secret, password, auth... or its last part is ``key``
    (``WANDB_API_KEY``). ``max_tokens`` or ``key_classes`` are not secrets."""
    parts = [p for p in re.split(r"[^a-z0-9]+", key.lower()) if p]
    return bool(parts) and (bool(_SECRET_PARTS.intersection(parts)) or parts[-1] == "key")


def _assign(m: "re.Match[str]") -> str:
    if is_secret_key(m.group("key")) and m.group("val") != MASK:
        return "%s%s%s%s" % (m.group("key"), m.group("sep"), m.group("quote"), MASK)
    return m.group(0)


def _text(s: str) -> str:
    s = _URL_CRED.sub(lambda m: "%s%s:%s@" % (m.group("scheme"), m.group("user"), MASK), s)
    s = _ASSIGN.sub(_assign, s)
    for pat in _VALUE:
        s = pat.sub(MASK, s)
    return s


def redact(value: Any, key: str = "") -> Any:
    """A copy of ``value`` (dicts, lists, strings, scalars) with secrets replaced by ``***``."""
    if key and is_secret_key(key) and value not in (None, "", [], {}):
        return MASK
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _text(value)
    return value
