"""Fault suite, kind LEAK: no secret reaches any output (shared fault_cases.md, LEAK s01-s09,
and e12 for the redactor's time). Every credential form is tried in every output it can reach:
the redactor itself, the check report (console -v and JSON), config's JSON, spec's files and
console, and bootstrap.sh's stderr and --log."""

import json
import os
import subprocess
import sys
import time

import pytest

from preflight import redact as redact_mod
from preflight.redact import MASK, add_secret, forget_secrets, is_secret_key, redact, strip_userinfo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEAK = pytest.mark.fault("LEAK")

#: (text holding a secret, the secret): every form a secret can take in printed text.
FORMS = [
    ("WANDB_API_KEY=wk-123456", "wk-123456"),
    ("export HF_TOKEN=abc123secret", "abc123secret"),
    ("RAY_REDIS_PASS=pw123x other=1", "pw123x"),
    ("DB_PASSWORD: hunter2x", "hunter2x"),
    ("password: my pass phrase", "pass phrase"),
    ("{'WANDB_API_KEY': 'abc123secret'}", "abc123secret"),
    ('{"MY_PASSWORD": "pw-42"}', "pw-42"),
    ('"{\\"MY_PASSWORD\\": \\"pw-43x\\"}"', "pw-43x"),
    ("DB_PASSWORD='pa ss, word' next=1", "ss, word"),
    ('API_TOKEN="a,b c" x', "a,b c"),
    ("SECRET=a,b,c", "a,b,c"),
    ("+trainer.wandb_key=0123456789abcdef", "0123456789abcdef"),
    ("+x.hf_key=hfkeyvalue1 +x.openai_key=oaikeyvalue2", "hfkeyvalue1"),
    ("+x.hf_key=hfkeyvalue1 +x.openai_key=oaikeyvalue2", "oaikeyvalue2"),
    ("wandbApiKey=camelvalue1", "camelvalue1"),
    ("--password hunter3x --verbose", "hunter3x"),
    ("--api-key=zzzz9999", "zzzz9999"),
    ("https://u:hunter2@idx.example/simple", "hunter2"),
    ("https://:hunter4@idx.example/simple", "hunter4"),
    ("git+https://oauth2:glpat-abcdefghijklmnopqrst@gitlab.example/x", "glpat-abcdefghijklmnopqrst"),
    ("https://0123456789abcdef0123456789abcdef@host/x", "0123456789abcdef0123456789abcdef"),
    ("token hf_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123 used", "hf_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123"),
    ("key sk-abcdefghijklmnop1234", "sk-abcdefghijklmnop1234"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123"),
    ("glpat-abcdefghijklmnopqrstuv", "glpat-abcdefghijklmnopqrstuv"),
    ("pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAw", "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAw"),
    ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
    ("curl -H 'Authorization: Bearer abcdefghijkl123'", "abcdefghijkl123"),
    ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc", "eyJhbGciOiJIUzI1NiJ9"),
    ("wandb login 0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123456789abcdef01234567"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA"),
]
#: Config and data names that only look like secrets: their values stay.
PLAIN = ["data.prompt_key=prompt", "reward_fn_key=data_source", "ppo_max_token_len_per_gpu=16384",
         "data.image_key=images", "max_tokens=16", "tokens_per_s=3.5", "NCCL_SOCKET_IFNAME=eth0",
         "key_classes=3", "keyboard: us"]


@pytest.fixture(autouse=True)
def _fresh_registry():
    forget_secrets()
    yield
    forget_secrets()


@LEAK
@pytest.mark.parametrize("text,secret", FORMS, ids=[f[0][:40] for f in FORMS])
def test_every_form_is_masked_in_text_and_in_structures(text, secret):
    assert secret not in redact(text)
    assert MASK in redact(text)
    # the same text inside a report structure, and as a list item
    doc = redact({"stdout_tail": "line\n" + text + "\nmore", "items": [text]})
    assert secret not in json.dumps(doc)


@LEAK
@pytest.mark.parametrize("text", PLAIN)
def test_config_names_are_not_secrets(text):
    assert redact(text) == text


@LEAK
def test_secret_value_is_masked_wherever_it_appears_later():
    # hidden once by name, then hidden bare in another field (a value derived from it)
    doc = redact({"trainer": {"wandb_key": "derived-secret-1"}, "log": "using derived-secret-1 now",
                  "url": "https://x.example/?k=derived-secret-1"})
    assert "derived-secret-1" not in json.dumps(doc)
    # a secret-named variable of the environment is hidden wherever it appears, URL-encoded too
    redact_mod.collect_environ({"MY_SERVICE_PASS": "p@ss word/1"})
    out = redact("echo p@ss word/1 and p%40ss%20word%2F1")
    assert "p@ss word/1" not in out and "p%40ss%20word%2F1" not in out


@LEAK
def test_environment_secrets_are_read_lazily(monkeypatch):
    monkeypatch.setenv("SOME_UPSTREAM_TOKEN", "bare-token-value-77")
    forget_secrets()
    assert redact("the target printed bare-token-value-77") == "the target printed ***"


@LEAK
@pytest.mark.parametrize("name", ["RAY_REDIS_PASS", "SMTP_PASSWD", "HF_TOKEN", "WANDB_API_KEY", "OPENAI_KEY",
                                  "trainer.wandb_key", "x.hf_key", "--api-key", "apiKey", "HFToken",
                                  "AWS_SECRET_ACCESS_KEY", "PIP_INDEX_PASSWORD", "CLIENT_SECRET", "GITLAB_PAT"])
def test_secret_names(name):
    assert is_secret_key(name)


@LEAK
def test_index_credentials_stripped():
    assert strip_userinfo("https://u:pw@idx.example:8443/simple?x=1") == "https://idx.example:8443/simple?x=1"
    assert strip_userinfo("https://:pw@idx.example/simple") == "https://idx.example/simple"
    assert strip_userinfo("https://idx.example/simple") == "https://idx.example/simple"


_ADVERSARIAL = {
    "word run": "a" * 100000, "assignments": "a=" * 50000, "colons": "a: " * 33000, "schemes": "http://" * 14000,
    "userinfo": "a://b:" * 16000, "options": "--a " * 25000, "quotes": "PASSWORD='" * 10000,
    "escaped quotes": '\\"' * 50000, "secret keys": "api_key=" * 12500, "dashes": "-" * 100000,
    "dots": "x." * 50000, "bearer": "Bearer " * 14000,
}


@pytest.mark.fault("HANG")
def test_redaction_is_linear_time():
    # e12: 100 KB in the old redactor ran for minutes. Run in a child with a deadline far above
    # what a linear pass needs (about 0.1 s each here), far below a quadratic one.
    code = ("import sys, json; sys.path.insert(0, %r)\nfrom preflight.redact import redact\n"
            "cases = json.loads(sys.stdin.read())\nfor k, v in cases.items(): redact(v); redact({'NCCL_BIG': v})\n"
            % ROOT)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(_ADVERSARIAL), universal_newlines=True,
                          timeout=120)
    assert proc.returncode == 0
    assert time.monotonic() - t0 < 60
