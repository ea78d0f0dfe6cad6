"""Redaction additions (reviewer's A09, A27): secret-named query parameters of index and file URLs
in shared files (locks, pylock, environment.json), NVIDIA API keys by shape, and the word after
"password"/"passwd" in prose, with common words of prose left alone (redact.py's module doc)."""

import pytest

from preflight.outputs.lock import Locked, LockResult, render_lock, render_pylock
from preflight.redact import MASK, redact_text, strip_userinfo, url_has_secret

SECRET = "SeCrEt9876zz"


@pytest.mark.parametrize("url,want", [
    ("https://h/simple?token=%s" % SECRET, "https://h/simple?token=***"),
    ("https://h/simple?private_token=%s&page=2" % SECRET, "https://h/simple?private_token=***&page=2"),
    ("https://u:%s@h/simple?access_token=%s" % (SECRET, SECRET), "https://h/simple?access_token=***"),
    ("https://h/f.whl?X-Amz-Signature=%s&X-Amz-Date=1" % SECRET, "https://h/f.whl?X-Amz-Signature=***&X-Amz-Date=1"),
    ("https://h/f.whl?sv=1&sig=%s" % SECRET, "https://h/f.whl?sv=1&sig=***"),
    ("https://h/simple?format=json", "https://h/simple?format=json"),
    ("https://h/simple", "https://h/simple"),
])
def test_shared_urls_hide_secret_query_parameters(url, want):
    assert strip_userinfo(url) == want
    assert url_has_secret(url) == (want != url)


def test_lock_and_pylock_never_hold_a_query_token():
    res = LockResult([Locked("six", "1.17.0", ["sha256:" + "a" * 64],
                             "https://h/files/six-1.17.0-py2.py3-none-any.whl?token=%s" % SECRET)],
                     "https://h/simple?token=%s" % SECRET, ["https://g/simple?private_token=%s" % SECRET], "3.12", "t")
    lock, pylock = render_lock(res), render_pylock(res)
    assert SECRET not in lock and SECRET not in pylock
    assert "--index-url https://h/simple?token=***" in lock
    assert "--extra-index-url https://g/simple?private_token=***" in lock


@pytest.mark.parametrize("text,want", [
    ("nvapi-" + "aB3_" * 16, MASK),
    ("key nvapi-%s used" % ("x" * 40), "key %s used" % MASK),
    ("password abc", "password ***"),
    ("passwd abc", "passwd ***"),
    ("PASSWORD hunter2!", "PASSWORD ***"),
    ("login with password %s now" % SECRET, "login with password *** now"),
])
def test_hidden(text, want):
    assert redact_text(text) == want


@pytest.mark.parametrize("text", [
    "Password reset link sent", "the password is required", "password for root", "enter your password below",
    "password (optional)", "passwordless login", "bypass abc", "password manager", "wrong password.",
    "nvapi-short", "the password must have 12 characters",
])
def test_prose_about_passwords_stays(text):
    assert redact_text(text) == text
