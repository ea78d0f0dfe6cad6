"""Keeps secrets out of every report.

A value is hidden when its key names a secret (HF_TOKEN, DB_PASSWORD, WANDB_API_KEY,
aws_secret_access_key; not data.prompt_key or ppo_max_token_len_per_gpu) or when the value itself looks like one (Hugging Face, OpenAI, GitHub, AWS,
W&B tokens, URLs with user:password). Applied by the runner to every result before rendering.
"""

import re
from typing import Any

__all__ = ["redact", "is_secret_key"]

# A name is a secret's when its last part is one of _SECRET_LAST (HF_TOKEN, DB_PASSWORD), when
# it holds one of _SECRET_ANY anywhere (aws_secret_access_key), or when it ends in "key" right
# after one of _KEY_QUALIFIERS (WANDB_API_KEY). Config names such as data.prompt_key,
# reward_fn_key or ppo_max_token_len_per_gpu are not secrets.
_SECRET_LAST = {"token", "secret", "password", "passwd", "pwd", "credential", "credentials", "auth", "cookie",
                "apikey", "passphrase"}
_SECRET_ANY = {"password", "passwd", "secret", "credentials", "apikey"}
_KEY_QUALIFIERS = {"api", "access", "secret", "private", "auth", "signing", "encryption", "ssh", "license",
                   "master", "service", "account"}
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
    """True when a variable or field name says it holds a secret (see the rules above)."""
    parts = [p for p in re.split(r"[^a-z0-9]+", key.lower()) if p]
    if not parts:
        return False
    if parts[-1] in _SECRET_LAST or _SECRET_ANY.intersection(parts):
        return True
    return parts[-1] == "key" and len(parts) >= 2 and parts[-2] in _KEY_QUALIFIERS


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
