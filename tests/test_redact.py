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
