# torch's view of the GPUs, from inside the target interpreter. Initialises CUDA.
# Emits "torch_cuda" with versions, arch list, device count and per-device facts, plus any
# warning torch printed while initialising (e.g. "The NVIDIA driver on your system is too old").
import os
import time
import warnings


def main():
    t0 = time.time()
    out = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch

        out["import_s"] = round(time.time() - t0, 3)
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
        out["hip"] = getattr(torch.version, "hip", None)
        try:
            out["arch_list"] = list(torch.cuda.get_arch_list())
        except Exception as exc:
            out["arch_list"] = []
            out["arch_list_error"] = str(exc)
        try:
            out["cudnn"] = torch.backends.cudnn.version()
        except Exception:
            out["cudnn"] = None
        try:
            out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception:
            out["nccl"] = None
        t1 = time.time()
        try:
            out["available"] = bool(torch.cuda.is_available())
            out["device_count"] = torch.cuda.device_count()
        except Exception as exc:
            out["available"] = False
            out["device_count"] = 0
            out["init_error"] = "%s: %s" % (type(exc).__name__, exc)
        devices = []
        if out.get("available"):
            for i in range(out["device_count"]):
                try:
                    p = torch.cuda.get_device_properties(i)
                    devices.append({
                        "index": i, "name": p.name,
                        "capability": "%d.%d" % (p.major, p.minor),
                        "total_memory_mib": int(p.total_memory // (1 << 20)),
                        "uuid": str(getattr(p, "uuid", "")) or None,
                    })
                except Exception as exc:
                    devices.append({"index": i, "error": "%s: %s" % (type(exc).__name__, exc)})
            try:
                # A real kernel launch: catches "no kernel image is available" that the
                # properties above cannot.
                x = torch.ones(1024, device="cuda:0")
                out["kernel_ok"] = float((x * 2).sum().item()) == 2048.0
            except Exception as exc:
                out["kernel_ok"] = False
                out["kernel_error"] = "%s: %s" % (type(exc).__name__, str(exc)[:500])
        out["init_s"] = round(time.time() - t1, 3)
        out["devices"] = devices
    out["warnings"] = sorted(set(str(w.message)[:500] for w in caught))[:10]
    emit("torch_cuda", **out)


main()
