# Lists a model's module names by building its architecture on the meta device (no weights, no
# memory) with the target's transformers and torch, from the local config.json only.
# ARGS: {"path": model directory, "trust_remote_code": bool}
# Events: "missing" {module, error} when torch or transformers cannot be imported;
#         "modules" {names: [...], linear: [...], cls} or "error" {error_type, error}.
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main():
    try:
        import torch
        import transformers
    except Exception as exc:
        emit("missing", module=str(getattr(exc, "name", "") or "torch/transformers"),
             error="%s: %s" % (type(exc).__name__, exc))
        return
    try:
        cfg = transformers.AutoConfig.from_pretrained(ARGS["path"], local_files_only=True,
                                                      trust_remote_code=bool(ARGS.get("trust_remote_code")))
        auto = transformers.AutoModelForCausalLM
        with torch.device("meta"):
            try:
                model = auto.from_config(cfg, trust_remote_code=bool(ARGS.get("trust_remote_code")))
            except ValueError:
                model = transformers.AutoModel.from_config(cfg, trust_remote_code=bool(ARGS.get("trust_remote_code")))
        names, linear = [], []
        for name, mod in model.named_modules():
            if not name:
                continue
            names.append(name)
            if isinstance(mod, torch.nn.Linear):
                linear.append(name)
        emit("modules", names=names, linear=linear, cls=type(model).__name__)
    except Exception as exc:
        emit("error", error_type=type(exc).__name__, error=str(exc)[:500])


main()
