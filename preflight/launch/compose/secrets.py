"""Redaction of config values for printing: secret-looking keys and values masked."""

from typing import Any

from ...redact import MASK as SECRET_MASK
from ...redact import add_secret, is_secret_key, plainly_secret, redact
from .tree import key_parts

def redact_config_value(key: str, value: Any, schema: Any) -> Any:
    """The value of config ``key`` as it may be printed or written.

    ``schema``: the keys of the release's own defaults (a set of dotted paths). What
    :func:`preflight.redact.redact` masks inside values (tokens, URL passwords, KEY=value) is always
    masked. By name: a key outside verl's schema (the user's own ``+x.api_key=...``) is hidden
    when any part of it names a secret; one of verl's own keys is hidden only when its last part
    plainly does (``password``, ``api_key``, ``..._token``) and the value is a string, so
    ``data.prompt_key`` or ``actor.ppo_max_token_len_per_gpu`` keep their values.
    """
    if value in (None, "", [], {}):
        return value
    parts = key_parts(key)
    if key in schema:
        if parts and plainly_secret(parts[-1]) and isinstance(value, str):
            add_secret(value)  # hidden wherever it appears again (a value derived from it)
            return SECRET_MASK
    elif any(is_secret_key(p) for p in parts if not p.isdigit()):
        redact(value, "secret")  # registers it (and its leaves), as above
        return SECRET_MASK
    return redact(value)
