"""Secrets never reach a report: by key, by shape, inside free text."""

from preflight.redact import MASK, is_secret_key, redact


def test_keys():
    for k in ("HF_TOKEN", "WANDB_API_KEY", "aws_secret_access_key", "DB_PASSWORD", "auth", "api.token",
              "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "proxy_password_file", "ssh_key"):
        assert is_secret_key(k), k
    for k in ("max_tokens", "tokens_per_s", "key_classes", "NCCL_SOCKET_IFNAME", "keyboard", "data.prompt_key",
              "reward_fn_key", "ppo_max_token_len_per_gpu", "image_key"):
        assert not is_secret_key(k), k


def test_values_and_text():
    assert redact({"HF_TOKEN": "abc", "n": 3}) == {"HF_TOKEN": MASK, "n": 3}
    assert redact("export WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567") == "export WANDB_API_KEY=***"
    assert redact("wandb login 0123456789abcdef0123456789abcdef01234567") == "wandb login ***"
    assert redact("+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_API_KEY=abc trainer.nnodes=2") == \
        "+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_API_KEY=*** trainer.nnodes=2"
    assert redact("https://bob:s3cret@host/x.parquet") == "https://***@host/x.parquet"
    assert redact("token hf_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123 used") == "token *** used"
    assert redact("max_tokens=16 tokens_per_s=3.5") == "max_tokens=16 tokens_per_s=3.5"
    assert redact(["GITHUB_TOKEN: 'ghp_x'", {"deep": {"OPENAI_API_KEY": "sk-x"}}]) == \
        ["GITHUB_TOKEN: '***'", {"deep": {"OPENAI_API_KEY": MASK}}]


# The one secret-name predicate (redact.secret_strength; launch preflight's "plainly secret" for
# verl's own keys is its strong half). Each row: name, strength (2 strong, 1 weak, 0 none). The
# rows marked * are where the two predicates of c768bc1 (redact's and launch/compose.py's)
# disagreed: the union, stricter, is kept, except for PWD/OLDPWD (the shell's directories) and
# switches (HF_HUB_DISABLE_IMPLICIT_TOKEN=1), whose values are never secrets.
NAMES = [
    ("HF_TOKEN", 2), ("WANDB_API_KEY", 2), ("api_key", 2), ("access_key", 2), ("secret_key", 2), ("private_key", 2),
    ("password", 2), ("passwd", 2), ("passphrase", 2), ("credential", 2), ("credentials", 2), ("auth", 2),
    ("cookie", 2), ("apikey", 2), ("token", 2), ("aws_secret_access_key", 2), ("GITHUB_TOKEN", 2),
    ("access_token", 2), ("refresh_token", 2), ("client_secret", 2), ("db_password", 2), ("HFToken", 2),
    ("wandbApiKey", 2), ("--api-key", 2), ("x_api_key", 2), ("npm_token", 2), ("balance_dp_token", 2),
    ("SSH_AUTH_SOCK", 2),  # * compose: secret; redact: not
    ("ssh_auth_sock", 2),  # *
    ("auth_header", 2),  # *
    ("use_auth_token", 2), ("basic_auth", 2),
    ("RAY_REDIS_PASS", 2),  # * redact: secret; compose: not
    ("redis_pass", 2), ("api_keys", 2), ("authorization", 2), ("encryption_key", 2), ("passcode", 2),  # *
    ("pat", 2), ("GITLAB_PAT", 2), ("secrets", 2), ("signing_key", 2), ("ssh_key", 2),  # *
    ("wandb_key", 1), ("openai_key", 1), ("trainer.wandb_key", 1), ("x.hf_key", 1), ("hf_tokens", 1),  # * weak
    ("PWD", 0), ("pwd", 0), ("OLDPWD", 0),  # * compose: secret (the shell's working directories: kept visible)
    ("HF_HUB_DISABLE_IMPLICIT_TOKEN", 0),  # * a switch
    ("max_tokens", 0), ("tokens", 0), ("special_tokens", 0), ("max_num_batched_tokens", 0), ("keys", 0),
    ("prompt_key", 0), ("data.prompt_key", 0), ("reward_fn_key", 0), ("image_key", 0), ("key_classes", 0),
    ("ppo_max_token_len_per_gpu", 0), ("log_prob_max_token_len_per_gpu", 0), ("NCCL_SOCKET_IFNAME", 0),
    ("keyboard", 0), ("tokenizer", 0), ("token_type_ids", 0), ("author", 0), ("public_key", 0),
    ("trust_remote_code", 0), ("pad_token_id", 0),
    # rev-attack W3: short and query-string spellings (a presigned URL's X-Amz-Signature, X-Goog-Signature)
    ("smtp_pw", 2), ("DB_PW", 2), ("db_creds", 2), ("aws_cred", 2), ("X-Amz-Signature", 2), ("X-Goog-Signature", 2),
    ("X-Amz-Credential", 2), ("X-Amz-Security-Token", 2), ("webhook_sig", 2),
    ("use_signal", 0), ("sigma", 0), ("pwr_limit", 0), ("power", 0), ("signature", 0), ("function_signature", 0),
]


def test_one_secret_name_predicate():
    from preflight.redact import plainly_secret, secret_strength

    assert len(NAMES) > 70
    wrong = [(n, secret_strength(n), want) for n, want in NAMES if secret_strength(n) != want]
    assert not wrong, wrong
    assert all(plainly_secret(n) == (want == 2) and is_secret_key(n) == (want > 0) for n, want in NAMES)


def test_presigned_urls_lose_their_signatures():
    url = ("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20261205"
           "&X-Amz-Signature=AMZsigSECRET99&X-Amz-Expires=3600")
    out = redact({"trainer": {"x_amz": url, "gcs": "https://storage.googleapis.com/b/o?X-Goog-Signature=GOOGsig11"}})
    text = str(out)
    assert "AMZsigSECRET99" not in text and "AKIDEXAMPLE" not in text and "GOOGsig11" not in text, text
    assert "b.s3.amazonaws.com/k" in text and "X-Goog-Signature=***" in text


def test_verl_keys_that_look_secret_keep_their_values():
    """launch preflight hides the string value of one of verl's own keys only when its last part
    is plainly secret: prompt_key, reward_fn_key keep theirs; a user's own +x.api_key does not."""
    from preflight.launch.compose import redact_config_value

    schema = {"data.prompt_key", "data.reward_fn_key", "trainer.project_name", "x.auth_header"}
    assert redact_config_value("data.prompt_key", "prompt", schema) == "prompt"
    assert redact_config_value("data.reward_fn_key", "data_source", schema) == "data_source"
    assert redact_config_value("x.auth_header", "Basic abc", schema) == MASK
    assert redact_config_value("+x.api_key", "abc", schema) == MASK
