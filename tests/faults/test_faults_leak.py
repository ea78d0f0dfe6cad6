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
from helpers import plant_start_hook

from preflight import redact as redact_mod
from preflight.redact import MASK, add_secret, forget_secrets, is_secret_key, redact, strip_userinfo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
    # more providers' token shapes, printed bare by a target
    ("hf_oauth_HFOAUTH15abcdefghijklmnopqrstuv", "HFOAUTH15abcdefghijklmnop"),
    ("stripe sk_live_51Habcdefghijklmnopqrstu and rk_live_51Habcdefghijklmnopqrstu", "51Habcdefghijklmnop"),
    ("sk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("google AIzaSyD-abcdefghijklmnopqrstuvwxyz01234", "SyD-abcdefghijklmnopqrstuvwxyz"),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("r8_abcdefghijklmnopqrstuvwxyz0123456789a", "abcdefghijklmnopqrstuvwxyz0123456789a"),
    ("dop_v1_" + "0123456789abcdef" * 4, "0123456789abcdef" * 4),
    ("SG.abcdefghijklmnopqrstuv.ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefg", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123"),
    ("ya29.a0AfH6SMBabcdefghijklmnopqrstu", "a0AfH6SMBabcdefghijklmnop"),
    ("GOCSPX-abcdefghijklmnopqrstuvwxyz12", "abcdefghijklmnopqrstuvwxyz12"),
    ("gsk_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("dckr_pat_abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
    ("hvs.CAESIabcdefghijklmnopqrstuvwxyz", "CAESIabcdefghijklmnopqrstuvwxyz"),
    ("AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ", "QQQQQQQQQQQQQQQQQQQQQQQQQQ"),
    ("whsec_abcdefghijklmnopqrstuvwxyz012345", "abcdefghijklmnopqrstuvwxyz012345"),
    ("https://hooks.slack.com/services/T0000AAAA/B0000BBBB/XXXXyyyyZZZZwwww1234", "XXXXyyyyZZZZwwww1234"),
    ("https://discord.com/api/webhooks/123456789/abcdefghijklmnopqrstuvwxyz_ABCD", "abcdefghijklmnopqrstuvwxyz"),
    ("requests: https://api.telegram.org/bot123456:AAHabcdefghijklmnopqrstuvwx/getMe", "AAHabcdefghijklmnopqr"),
    ("https://acct.blob.core.windows.net/c/b?sv=2022&sig=abcDEF123%2Bxyz456ghiJKL%3D", "abcDEF123%2Bxyz456"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBGabcdefgh\n-----END PGP PRIVATE KEY BLOCK-----", "lQOYBGabcdefgh"),
    ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
    ("curl -H 'Authorization: Bearer abcdefghijkl123'", "abcdefghijkl123"),
    ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc", "eyJhbGciOiJIUzI1NiJ9"),
    ("wandb login 0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123456789abcdef01234567"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA"),
    # plural names, list values
    ("+trainer.wandb_api_keys=[k-0123456789]", "k-0123456789"),
    ("+trainer.hf_tokens=[hft-abcdef123]", "hft-abcdef123"),
    ("api_tokens: [tok-plural-1, tok-plural-2]", "tok-plural-2"),
    ("OPENAI_API_KEYS=oakey-123abc python3 x.py", "oakey-123abc"),
    ("secrets: s3cr3t-list-9", "s3cr3t-list-9"),
    ("DB_PASSWORDS='pw-one,pw-two'", "pw-two"),
    ("api_tokens:\n  - blocklist-tok-1\n  - blocklist-tok-2\nother: 1", "blocklist-tok-2"),
    # URL userinfo: a password holding @ (pip splits at the last @), a user-only token
    ("http://u:p@ss-word9@host/simple", "ss-word9"),
    ("https://a1b2c3d4e5f6g7h8i9j0kfury@pypi.fury.io/acme/", "a1b2c3d4e5f6g7h8i9j0kfury"),
    ("ray://admin:raypw-77@head:10001", "raypw-77"),
    ("redis://rediuser:redis-pw-1@h:6379", "redis-pw-1"),
    # what a target prints: a tuple, an argv list, a YAML block, curl -u, mysql -p, XML, no-break spaces
    ("('HF_TOKEN', 'tupletok-111')", "tupletok-111"),
    ("['--api-key', 'argvtok-222']", "argvtok-222"),
    ('["WANDB_API_KEY", "jsonpair-223"]', "jsonpair-223"),
    ("wandb_api_key: |\n  blocktok-333\n  blocktok-334\nnext: 1", "blocktok-334"),
    ("password: >-\n    foldedpw-335", "foldedpw-335"),
    ("curl -u admin:curlpw-555 https://x", "curlpw-555"),
    ("curl --user=admin:curlpw-556 https://x", "curlpw-556"),
    ("mysql -h db -u root -pmysqlpw-000 mydb", "mysqlpw-000"),
    ("sshpass -psshpw-001 ssh host", "sshpw-001"),
    ("<password>xmltok-666</password>", "xmltok-666"),
    ('<api_key kind="x">xmltok-667</api_key>', "xmltok-667"),
    ("HF_TOKEN\u00a0=\u00a0nbsptok-888", "nbsptok-888"),
    ("HF_TOKEN\u2003:\u2003emsptok-889", "emsptok-889"),
    # values that open a bracket: followed to the matching close, across lines
    ('{\n  "api_keys": [\n    "zq9-list-1"\n  ],\n  "n": 3\n}', "zq9-list-1"),
    ('{\n  "password": [\n    "x",\n    "zq9-pw-2"\n  ]\n}', "zq9-pw-2"),
    ("password:\n- zq9-yaml-3\nother: 1", "zq9-yaml-3"),
    ("s.auth = ('alice', 'zq9-auth-4')", "zq9-auth-4"),
    ("api_key = {\n 'primary': 'zq9-dict-5'\n} and after", "zq9-dict-5"),
    ("secret: [unclosed zq9-open-6", "zq9-open-6"),
    # a comment, tag or anchor before the list; a call; an option; a (name, list) pair; JSON in a string
    ("db:\n  password:   # rotate\n  - zq9-yc-7\nother: 1", "zq9-yc-7"),
    ("password: !!seq\n  - zq9-tag-8", "zq9-tag-8"), ("password: &pw\n  - zq9-anc-9\nk: 1", "zq9-anc-9"),
    ('r = get(url, auth=HTTPBasicAuth("user", "zq9-call-10"))', "zq9-call-10"),
    ('--api-keys ["zq9-opt-11", "b"] --x 1', "zq9-opt-11"), ('("HF_TOKEN", ["zq9-pair-12"])', "zq9-pair-12"),
    ('{\\"password\\": [\\"zq9-esc-13\\"], \\"lr\\": 0.1}', "zq9-esc-13"),
]
#: Config and data names that only look like secrets: their values stay.
PLAIN = ["data.prompt_key=prompt", "reward_fn_key=data_source", "ppo_max_token_len_per_gpu=16384",
         "data.image_key=images", "max_tokens=16", "tokens_per_s=3.5", "NCCL_SOCKET_IFNAME=eth0",
         "key_classes=3", "keyboard: us",
         # a *_key field that names a config key, a weak name with a plain value, counts of tokens
         "num_cpus_key=ray_kwargs.ray_init.num_cpus", "trainer.num_cpus_key: ray_kwargs.ray_init.num_cpus",
         "launch: ray_kwargs.ray_init.num_cpus=null", "video_key=videos", "x.sort_key=null", "hf_tokens=4096",
         "max_new_tokens=512", "special_tokens: [pad, eos]", "('max_tokens', 16)", "python -u train.py",
         "tar -pxf a.tar", "ssh://git@github.example/x.git", "curl -u admin https://x",
         # token ids under a weak name, a bracketed value under no secret name
         '"sample_tokens": [450, 483]', "hf_tokens: [1, 2]", "config: {a: 1}", "shape = (2, 16)",
         "hf_tokens = [[1, 2], [3]]", "trainer.logger: [console, wandb]", "x = dict(a=1)"]


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


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("field,value", [("num_cpus_key", "ray_kwargs.ray_init.num_cpus"), ("prompt_key", "prompt"),
                                         ("reward_fn_key", "data_source"), ("image_key", "images"),
                                         ("video_key", "videos"), ("resume_key", None), ("ckpt_key", 3),
                                         ("max_tokens", 16), ("hf_tokens", "1024"),
                                         # token ids and shapes: lists of numbers are no secret
                                         ("sample_tokens", [450, 483, 450]), ("row_tokens", [1, 2.5, None]),
                                         ("shape_key", [2, 16])])
def test_config_key_fields_stay_visible(field, value):
    # a field that names a config key, or a weak name (ends in key/tokens, no api/secret/token/
    # password/auth/credential) holding null, a number or a config path, is shown; the path does
    # not become a secret that is hidden elsewhere either
    doc = {field: value, "line": "launch: %s=null" % value}
    assert redact(doc) == doc


@LEAK
@pytest.mark.parametrize("field,value", [("wandb_key", "0123456789abcdef"), ("num_cpus_key", "k-secret-1"),
                                         ("hf_tokens", ["hft-abcdef123"]), ("api_key", "images"),
                                         ("api_key", [1234, 5678]), ("wandb_keys", [12, "k-secret-2"]),
                                         ("api_tokens", "12345"), ("secret_key", "a.b"), ("passwords", ["x1"]),
                                         ("WANDB_API_KEYS", "plain")])
def test_secret_fields_are_hidden_whatever_the_value_looks_like(field, value):
    # strong names are hidden whatever the value; weak ones unless the value is plainly no secret
    assert redact({field: value, "note": "see %s" % value})[field] == MASK


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


# ---- every output of the product ------------------------------------------------------------------
def pf(pyz, *args, env=None, timeout=300):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run([sys.executable, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, env=full)


def _py311():
    from preflight.outputs.lock import find_interpreter

    py = find_interpreter("%d.%d" % sys.version_info[:2])
    return py or sys.executable


@LEAK
@pytest.mark.parametrize("printed", [
    'print({"WANDB_API_KEY": os.environ["WANDB_API_KEY"]})',                  # s09: a dict
    'print(json.dumps({"MY_PASSWORD": os.environ["WANDB_API_KEY"]}))',        # s09: JSON
    'print("token:", os.environ["WANDB_API_KEY"])',                           # bare, after a plain word
    'print(os.environ["WANDB_API_KEY"])',                                     # bare, alone
    'print("https://user:%s@host/x" % os.environ["WANDB_API_KEY"])',          # in a URL
    'import sys; sys.stderr.write("DB_PASSWORD=\'%s, x\'\\n" % os.environ["WANDB_API_KEY"])',  # stderr, quoted
])
def test_target_output_is_masked_in_console_and_json(pyz, tmp_path, printed):
    # s09: a target that prints a secret in any form: masked in the evidence, console -v and JSON
    v = tmp_path / "v"
    subprocess.run([_py311(), "-m", "venv", "--without-pip", str(v)], check=True)
    site = next(v.glob("lib/python3.*/site-packages"))
    plant_start_hook(site, "import os, json\n" + printed + "\n")
    secret = "abc123secret-Z"
    out = tmp_path / "r.json"
    p = pf(pyz, "check", "--python", str(v / "bin" / "python"), "--stage", "python", "-v", "--json", str(out),
           env={"WANDB_API_KEY": secret})
    assert p.returncode in (0, 1), p.stderr
    text = out.read_text()
    assert "stdout_tail" in text or "stderr_tail" in text or MASK in text
    for where in (text, p.stdout, p.stderr):
        assert secret not in where


@LEAK
@pytest.mark.parametrize("var", ["RAY_REDIS_PASS", "NCCL_IB_PASSWORD", "HF_TOKEN", "CUDA_SOME_SECRET",
                                 "RAY_AUTH_KEY", "HF_API_KEY"])
def test_captured_variables_are_masked(pyz, tmp_path, var):
    # s01a: the gpu stage captures RAY_/NCCL_/CUDA_/HF_ variables: a secret-named one is masked
    out = tmp_path / "r.json"
    p = pf(pyz, "check", "--stage", "gpu", "-v", "--json", str(out), env={var: "pw123-value"})
    assert p.returncode in (0, 1, 2)
    for where in (out.read_text(), p.stdout, p.stderr):
        assert "pw123-value" not in where


@LEAK
@pytest.mark.parametrize("key", ["trainer.wandb_key", "trainer.hf_key", "actor.openai_key", "x.api_token",
                                 "ray_kwargs.env.COMET_PASS"])
def test_config_overrides_are_masked(pyz, tmp_path, key):
    # s02a: a user's +key=value override whose name ends in _key (or another secret name)
    out = tmp_path / "r.json"
    p = pf(pyz, "config", "--verl", "0.9.1", "--json", str(out), "--", "+%s=0123456789abcdef" % key)
    assert p.returncode in (0, 1), p.stderr
    for where in (out.read_text(), p.stdout, p.stderr):
        assert "0123456789abcdef" not in where
    assert MASK in out.read_text()


def bootstrap(*args, env=None):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(["sh", os.path.join(ROOT, "bootstrap.sh")] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300, env=full)


@LEAK
@pytest.mark.parametrize("launch,secret", [
    ("WANDB_API_KEY=wk-123456 python3 -m verl.trainer.main_ppo", "wk-123456"),
    ("python3 -m verl.trainer.main_ppo +api_key=sk-abcdefghijklmnop1234", "sk-abcdefghijklmnop1234"),
    ("python3 -m verl.trainer.main_ppo +trainer.wandb_key=0123456789abcdef", "0123456789abcdef"),
    ("HF_TOKEN='a b, c' python3 -m verl.trainer.main_ppo", "a b, c"),
    ("python3 -m verl.trainer.main_ppo data.train_files=https://u:pw-in-url@host/x.parquet", "pw-in-url"),
    ("OPENAI_API_KEYS=oakey-123abc python3 -m verl.trainer.main_ppo", "oakey-123abc"),
    ("python3 -m verl.trainer.main_ppo +trainer.hf_tokens=[hft-abcdef123]", "hft-abcdef123"),
    ("python3 -m verl.trainer.main_ppo data.train_files=http://u:p@ss-word9@host/x.parquet", "ss-word9"),
])
def test_bootstrap_trace_and_log_are_masked(pyz_file, tmp_path, launch, secret):
    # s06: bootstrap.sh printed its whole command line to stderr and --log
    log = tmp_path / "bs.log"
    p = bootstrap("--pyz", pyz_file, "--check-only", "--python", sys.executable, "--log", str(log), "--",
                  "--stage", "config", "--launch", launch)
    assert p.returncode in (0, 1), p.stderr
    assert "+ " in p.stderr and MASK in p.stderr
    for where in (log.read_text(), p.stdout, p.stderr):
        assert secret not in where


@LEAK
@pytest.mark.parametrize("url,secret", [("https://u:hunter2@idx.example/simple", "hunter2"),
                                        ("https://:hunter2@idx.example/simple", "hunter2"),
                                        ("https://ghp_abcdefghijklmnopqrstuvwxyz0123@idx.example/simple",
                                         "ghp_abcdefghijklmnopqrstuvwxyz0123"),
                                        ("https://u:p@ss-word9@idx.example/simple", "ss-word9"),
                                        ("https://a1b2c3d4e5f6g7h8i9j0kfury@pypi.fury.io/acme/",
                                         "a1b2c3d4e5f6g7h8i9j0kfury")])
def test_bootstrap_install_args_are_masked(pyz_file, tmp_path, url, secret):
    # s07: --install-args '--torch-index https://u:pw@...' in the dry run's trace and the log
    log = tmp_path / "bs.log"
    p = bootstrap("--pyz", pyz_file, "--dry-run", "--log", str(log), "--install-args", "--torch-index " + url)
    assert p.returncode == 0, p.stderr
    assert "--torch-index" in p.stderr
    for where in (log.read_text(), p.stdout, p.stderr):
        assert secret not in where


@LEAK
def test_bootstrap_download_url_credentials_are_not_printed(tmp_path):
    # the --pyz URL itself may carry a user and password; nothing listens on the port
    log = tmp_path / "bs.log"
    p = bootstrap("--pyz", "http://u:hunter2@127.0.0.1:9/preflight.pyz", "--sha256", "0" * 64, "--log", str(log))
    assert p.returncode == 4
    for where in (log.read_text(), p.stdout, p.stderr):
        assert "hunter2" not in where


@LEAK
def test_lock_and_environment_json_carry_no_index_credentials(matrix, tmp_path):
    # s03/s04 at the writers: a lock resolved through an index with credentials names the index
    # without them; environment.json too; the credentials stay in memory for this run's pip
    from preflight.outputs.lock import LockResult, Locked, parse_lock, render_lock
    from preflight.outputs.spec import Spec, write_spec
    from preflight.resolve import resolve

    urls = ["https://tuser:tpass@idx.example/simple", "https://:tpass2@idx2.example/whl/cu130"]
    lock = LockResult([Locked("six", "1.17.0", ["sha256:" + "a" * 64])], "https://iu:tpass3@idx3.example/simple",
                      urls, "3.11", "interpreter x")
    text = render_lock(lock, ["verl-preflight test (index https://tuser:tpass@idx.example/simple)"])
    assert parse_lock(text) == {"six": "1.17.0"}
    assert "--extra-index-url https://idx.example/simple" in text and "--index-url https://idx3.example/simple" in text
    res = resolve(matrix, matrix.verl_versions()[-1], python="3.11")
    stack = {"extra_index_urls": urls, "overrides": {"torch_index": urls[0]}, "private_index": "x"}
    spec = Spec(["six==1.17.0"], lock, text, [], stack, index_credentials=urls)
    paths = write_spec(spec, str(tmp_path / "out"), matrix, res, {}, {"note": urls[1]})
    for p in paths:
        body = open(p).read()
        assert "tpass" not in body, p
    assert "idx.example/simple" in open(paths[1]).read()


@LEAK
def test_spec_console_masks_the_index_password(pyz, tmp_path):
    # errors mask it; a user's lock in the way stops the run before pip, so this stays fast (the
    # console of a whole run is checked by test_image_with_index_credentials_writes_none)
    out = tmp_path / "o"
    out.mkdir()
    (out / "requirements.lock").write_text("# mine\n")
    p = pf(pyz, "spec", "--verl", "0.9.1", "--no-backend", "--torch", "2.13.0", "--torch-index",
           "http://tuser:tpass@127.0.0.1:9/simple", "--python", "3.11", "--no-probe", "-o", str(out))
    assert p.returncode == 2 and "tpass" not in p.stderr + p.stdout
    assert "o/requirements.lock" in p.stderr


@LEAK
@pytest.mark.realenv
def test_image_with_index_credentials_writes_none(pyz, tmp_path):
    # s03/s04 end to end: image (lock, environment.json, Dockerfile, console) with --torch-index
    # http://tuser:tpass@... served here; pip reaches it with the credentials, no file holds them
    import http.server
    import socketserver
    import threading

    seen = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            self.send_response(404)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = socketserver.TCPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = "http://tuser:tpass@127.0.0.1:%d/simple" % srv.server_address[1]
        out = tmp_path / "img"
        p = pf(pyz, "image", "--verl", "0.9.1", "--no-backend", "--torch", "2.13.0", "--torch-index", url,
               "--python", "3.11", "--no-probe", "-o", str(out), timeout=900)
    finally:
        srv.shutdown()
    assert p.returncode == 0, p.stderr[-2000:]
    assert any(a and a.startswith("Basic ") for a in seen)   # pip did use the credentials
    for f in ("requirements.lock", "environment.json", "Dockerfile"):
        assert "tpass" not in (out / f).read_text(), f
    assert "--extra-index-url http://127.0.0.1:" in (out / "requirements.lock").read_text()
    assert "--mount=type=secret,id=netrc" in (out / "Dockerfile").read_text()
    assert "tpass" not in p.stderr + p.stdout


@LEAK
def test_resolved_env_interpolations_and_values_derived_from_them(pyz, tmp_path):
    # ${oc.env:...} resolved by Hydra: a secret-named variable's value, a plain-named variable put
    # under a secret key, and a value built from it are all masked in the console and the JSON
    out = tmp_path / "r.json"
    p = pf(pyz, "config", "--verl", "0.9.1", "--print", "--json", str(out), "--",
           "+trainer.note=${oc.env:MY_SERVICE_PASS}", "+trainer.api_key=${oc.env:UPSTREAM_VAR}",
           "+trainer.url=pre-${oc.env:UPSTREAM_VAR}-post",
           env={"MY_SERVICE_PASS": "zzsecret99", "UPSTREAM_VAR": "plainvalue77"})
    assert p.returncode in (0, 1), p.stderr
    values = json.loads(out.read_text())["launch"]["config"]["values"]
    assert values["trainer.note"]["value"] == MASK and values["trainer.api_key"]["value"] == MASK
    assert values["trainer.url"]["value"] == "pre-%s-post" % MASK
    for where in (out.read_text(), p.stdout, p.stderr):
        assert "zzsecret99" not in where and "plainvalue77" not in where


@LEAK
def test_report_boundary_hides_a_secret_everywhere_once_seen_anywhere():
    # the boundary redacts field by field: a value seen under a secret name in one row's evidence
    # is hidden in an earlier row's message and in the target facts too
    from preflight.report import Report
    from preflight.report.render import redact_report
    from preflight.result import Result, Status

    rows = [Result("python.a", "python", Status.WARN, "import failed: quoting sekrit-value-9 here", fix="x"),
            Result("gpu.env", "gpu", Status.PASS, "set", evidence={"variables": {"SOME_SERVICE_PASSWD":
                                                                                  "sekrit-value-9"}})]
    out = redact_report(Report(results=rows, stages=["python", "gpu"], target={"note": "sekrit-value-9"}))
    text = json.dumps([[r.message, r.evidence] for r in out.results] + [out.target])
    assert "sekrit-value-9" not in text and MASK in out.results[0].message


# ---- the forms above through every output: console, JSON, junit, markdown ---------------------------
#: (what the target prints, the secret in it): each kind of form a target's output may take
TARGET_FORMS = [
    ("('HF_TOKEN', 'tupletok-111')", "tupletok-111"),
    ("['--api-key', 'argvtok-222']", "argvtok-222"),
    ("wandb_api_key: |\n  blocktok-333\nnext: 1", "blocktok-333"),
    ("curl -u admin:curlpw-555 https://x", "curlpw-555"),
    ("mysql -h db -pmysqlpw-000", "mysqlpw-000"),
    ("<password>xmltok-666</password>", "xmltok-666"),
    ("HF_TOKEN\u00a0=\u00a0nbsptok-888", "nbsptok-888"),
    ("api_tokens: [listtok-999]", "listtok-999"),
    ("OPENAI_API_KEYS=oakey-123abc", "oakey-123abc"),
    ("index http://u:p@ss-word9@host/simple", "ss-word9"),
    ("https://a1b2c3d4e5f6g7h8i9j0kfury@pypi.fury.io/acme/", "a1b2c3d4e5f6g7h8i9j0kfury"),
]
#: console (-v) and JSON of one run; junit of another (it shows the evidence of failed rows)
FORMATS_OUT = ["console", "json", "junit"]


@pytest.fixture(scope="module")
def target_outputs(pyz, tmp_path_factory):
    """Check a target whose sitecustomize prints every TARGET_FORMS text (stdout and stderr, each
    after a marker F<i>) and then exits 3, so its output is the failed row's evidence:
    {format: everything that format showed or wrote}."""
    tmp = tmp_path_factory.mktemp("target")
    v = tmp / "v"
    subprocess.run([_py311(), "-m", "venv", "--without-pip", str(v)], check=True)
    site = next(v.glob("lib/python3.*/site-packages"))
    lines = ["import os, sys"]
    for i, (text, _) in enumerate(TARGET_FORMS):
        stream = "sys.stdout" if i % 2 else "sys.stderr"
        lines.append("%s.write(%r)" % (stream, "F%d %s\n" % (i, text)))
    lines.append("sys.stdout.flush(); sys.stderr.flush(); os._exit(3)")
    plant_start_hook(site, "\n".join(lines) + "\n")
    py = str(v / "bin" / "python")
    p = pf(pyz, "check", "--python", py, "--stage", "python", "-v", "--json", str(tmp / "r.json"))
    assert p.returncode == 1, p.stderr
    out = {"console": p.stdout + p.stderr, "json": (tmp / "r.json").read_text()}
    q = pf(pyz, "check", "--python", py, "--stage", "python", "-q", "--format", "junit", "--output", str(tmp / "r.xml"))
    assert q.returncode == 1, q.stderr
    out["junit"] = (tmp / "r.xml").read_text() + q.stdout + q.stderr
    return out


@LEAK
@pytest.mark.parametrize("fmt", FORMATS_OUT)
@pytest.mark.parametrize("i", range(len(TARGET_FORMS)), ids=[s for _, s in TARGET_FORMS])
def test_target_forms_are_masked_in_every_output(target_outputs, i, fmt):
    # what the target printed reaches the output (its marker, masked), the secret does not
    assert "F%d " % i in target_outputs[fmt] and MASK in target_outputs[fmt]
    assert TARGET_FORMS[i][1] not in target_outputs[fmt]


#: (config argument, the secret): plural names and list values, as overrides and in a --file
CONFIG_FORMS = [
    ("+trainer.wandb_api_keys=[k-0123456789]", "k-0123456789"),
    ("+trainer.hf_tokens=[hft-abcdef123]", "hft-abcdef123"),
    ("+trainer.secrets=[s3cret-list-1]", "s3cret-list-1"),
    ("+trainer.passwords=pwlist-2", "pwlist-2"),
    ("file:api_tokens: [tok-file-3]", "tok-file-3"),
    ("file:db_passwords:\n  - tok-file-4", "tok-file-4"),
]


@LEAK
@pytest.mark.parametrize("fmt", FORMATS_OUT)
@pytest.mark.parametrize("arg,secret", CONFIG_FORMS, ids=[s for _, s in CONFIG_FORMS])
def test_config_plural_names_are_masked_in_every_output(pyz, tmp_path, arg, secret, fmt):
    args = ["config", "--verl", "0.9.1", "--print"]
    if arg.startswith("file:"):
        f = tmp_path / "c.yaml"
        f.write_text("trainer:\n  " + arg[5:].replace("\n", "\n  ") + "\n")
        args += ["--file", str(f)]
        extra = []
    else:
        extra = ["--", arg]
    if fmt != "console":
        args += ["--format", fmt, "--output", str(tmp_path / "out")]
    p = pf(pyz, *(args + extra))
    assert p.returncode in (0, 1), p.stderr
    text = p.stdout + p.stderr + ((tmp_path / "out").read_text() if fmt != "console" else "")
    assert secret not in text
    assert MASK in text


@pytest.mark.fault("WRONG")
def test_cluster_launch_line_shows_the_num_cpus_key(pyz_file, tmp_path):
    # the launch row names ray_kwargs.ray_init.num_cpus (a config key, under the field
    # num_cpus_key): shown in the console and the JSON, not "***=null" (junit and markdown show
    # no text for a passed row)
    launch = "python3 -m verl.trainer.main_ppo trainer.nnodes=1"
    p = pf(pyz_file, "cluster", "--launch", launch, "-v", "--json", str(tmp_path / "r.json"))
    assert p.returncode in (0, 1, 2), p.stderr
    doc = (tmp_path / "r.json").read_text()
    assert '"num_cpus_key": "ray_kwargs.ray_init.num_cpus"' in doc
    for text in (p.stdout, doc):
        assert "ray_kwargs.ray_init.num_cpus=null" in text and "***=null" not in text


@LEAK
@pytest.mark.parametrize("tool", ["pip", "uv"])
def test_index_credentials_never_reach_a_resolver_command_line(tmp_path, monkeypatch, tool):
    """Every user of a machine can read a process's command line (ps); an index URL with a
    password must reach pip or uv through the environment only. The resolvers are stand-ins that
    record what they were given and fail."""
    from preflight.errors import UsageError
    from preflight.outputs import lock

    seen = tmp_path / "seen.json"
    fake = tmp_path / tool
    # 'pip config list' goes to the real pip (what the user configured); anything else is recorded
    fake.write_text("#!%s\nimport json, os, subprocess, sys\n"
                    "if sys.argv[1:4] == ['-m', 'pip', 'config']:\n"
                    "    sys.exit(subprocess.call([%r] + sys.argv[1:]))\n"
                    "json.dump({'argv': sys.argv, 'env': dict(os.environ)}, open(%r, 'w'))\nsys.exit(1)\n"
                    % (sys.executable, sys.executable, str(seen)))
    fake.chmod(0o755)
    main, extra = "https://u:idx-pass-111@pypi.example/simple", "https://:idx-pass-222@torch.example/cu130"
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://mirror.example/simple")
    if tool == "uv":
        monkeypatch.setenv("UV", str(fake))
        monkeypatch.setattr(lock, "pip_settings", lambda python=None: {})
        kw = {"use_uv": True}
    else:
        kw = {"pip_python": str(fake), "use_uv": False}
    with pytest.raises(UsageError):
        lock.resolve_lock(["torch==2.11.0"], "3.12", index_url=main, extra_index_urls=[extra], timeout=60, **kw)
    got = json.loads(seen.read_text())
    assert "idx-pass" not in " ".join(got["argv"])
    env = got["env"]
    if tool == "uv":
        assert env["UV_INDEX_URL"] == main and env["UV_EXTRA_INDEX_URL"].split() == [extra]
        assert "--index-url" not in got["argv"] and "--find-links" not in got["argv"]
    else:
        assert env["PIP_INDEX_URL"] == main
        assert env["PIP_EXTRA_INDEX_URL"].split() == [extra, "https://mirror.example/simple"]


@LEAK
def test_uv_gets_find_links_and_constraints_through_its_environment(tmp_path, monkeypatch):
    """pip's find-links and constraint settings (which may be URLs with credentials) reach uv as
    UV_FIND_LINKS (comma-separated) and UV_CONSTRAINT, never as arguments."""
    from preflight.errors import UsageError
    from preflight.outputs import lock

    seen = tmp_path / "seen.json"
    fake = tmp_path / "uv"
    fake.write_text("#!%s\nimport json, os, sys\njson.dump({'argv': sys.argv, 'env': dict(os.environ)}, "
                    "open(%r, 'w'))\nsys.exit(1)\n" % (sys.executable, str(seen)))
    fake.chmod(0o755)
    links = ["http://fl:flpass-333@127.0.0.1:1/wheels/", "/srv/wheels"]
    monkeypatch.setenv("UV", str(fake))
    monkeypatch.setattr(lock, "pip_settings", lambda python=None: {"find-links": list(links),
                                                                    "constraint": ["/etc/c.txt"]})
    with pytest.raises(UsageError):
        lock.resolve_lock(["six"], "3.12", use_uv=True, timeout=60)
    got = json.loads(seen.read_text())
    assert "flpass" not in " ".join(got["argv"]) and "/etc/c.txt" not in got["argv"]
    assert got["env"]["UV_FIND_LINKS"].split(",") == links and got["env"]["UV_CONSTRAINT"] == "/etc/c.txt"


def test_pip_keeps_the_users_configured_extra_index(tmp_path, monkeypatch):
    """PIP_EXTRA_INDEX_URL replaces pip's configured extra indexes (where --extra-index-url added to
    them): the ones pip itself lists from its configuration file are kept after ours."""
    from preflight.outputs.lock import _index_env

    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nextra-index-url = http://127.0.0.1:8801/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    env = _index_env(None, ["http://127.0.0.1:8802/simple"], sys.executable)
    assert env["PIP_EXTRA_INDEX_URL"].split() == ["http://127.0.0.1:8802/simple", "http://127.0.0.1:8801/simple"]


@LEAK
@pytest.mark.parametrize("text,kept", [
    ('{\\"password\\": [\\"zq9-a\\"], \\"lr\\": 0.1}\ntrainer.total_epochs: 1', "trainer.total_epochs: 1"),
    ('{"password": ["a\\\\", "zq9-b"], "lr": 1}\nrest: ok', "rest: ok"),
    ("wandb_key: [don't, zq9-c]\nrest: ok", "rest: ok")])
def test_a_bracketed_secret_is_hidden_without_hiding_what_follows(text, kept):
    out = redact(text)
    assert "zq9" not in out and kept in out, out
