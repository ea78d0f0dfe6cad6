# Target script: runs verl's own entry point for the rehearsal and records what it printed, line
# by line with the time each line arrived, and the GPU memory in use, sampled while it runs.
# The Hydra overrides reach verl through a private file read inside the child (never its command
# line): the child is `python -c BOOT FILE`, and BOOT sets sys.argv and runs the module as
# `python -m MODULE` would (runpy).
# ARGS: {"module": "verl.trainer.main_ppo", "overrides": [...], "workdir": DIR (private, exists),
#        "log": PATH, "gpu_log": PATH, "env": {NAME: VALUE}, "unset": [NAME...], "deadline_s": S,
#        "sample_s": 0.5, "stall": {"patterns": [REGEX...], "progress": [REGEX...], "seconds": S} (optional)}
# The log file holds "<seconds since start> <line>" per line of the child's stdout+stderr.
# The GPU file holds "<seconds> <gpu index> <MiB used>" per sample (NVML through pynvml when the
# target has it, else nvidia-smi; nothing when neither answers).
# A line matching a stall pattern (a Ray actor that died in its creation task) starts a clock, and
# each later progress line (a start-up marker, a step line) starts it again: when the child has not
# ended S seconds after the last of them, it is stopped as at the deadline (verl keeps waiting for
# the dead actor's results).
# Events: "started" {pid}; "gpu" {how, count}; "done" {returncode, seconds, timed_out, lines, stalled
#         ([seconds, line] of the line that started the clock, when the run was stopped for it)}.
import os
import re
import signal
import subprocess
import sys
import threading
import time

BOOT = ("import json, runpy, sys\n"
        "with open(sys.argv[1]) as fh:\n"
        "    a = json.load(fh)\n"
        "sys.argv = [a['module']] + a['overrides']\n"
        "runpy.run_module(a['module'], run_name='__main__', alter_sys=True)\n")


def _sampler(path, period, stop, t0):
    how, count, read = None, 0, None
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]

        def read():
            return [pynvml.nvmlDeviceGetMemoryInfo(h).used // (1024 * 1024) for h in handles]
        how = "nvml"
    except Exception:
        try:
            subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=10, check=True)

            def read():
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10,
                                     universal_newlines=True).stdout
                return [int(x.strip()) for x in out.splitlines() if x.strip().isdigit()]
            how = "nvidia-smi"
        except Exception:
            read = None
    emit("gpu", how=how, count=count)
    if read is None:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "w") as fh:
        while not stop.is_set():
            t = time.monotonic() - t0
            try:
                vals = read()
            except Exception:
                vals = []
            for i, v in enumerate(vals):
                fh.write("%.3f %d %d\n" % (t, i, v))
            fh.flush()
            stop.wait(period)


def main():
    import json

    work = ARGS["workdir"]
    t0 = time.monotonic()
    argfile = os.path.join(work, "overrides.json")
    fd = os.open(argfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"module": ARGS.get("module") or "verl.trainer.main_ppo", "overrides": ARGS.get("overrides", [])}, fh)
    env = dict(os.environ)
    for name in ARGS.get("unset", []):
        env.pop(name, None)
    env.update(ARGS.get("env") or {})
    env["PYTHONUNBUFFERED"] = "1"
    stop = threading.Event()
    sampler = threading.Thread(target=_sampler, args=(ARGS["gpu_log"], float(ARGS.get("sample_s", 0.5)), stop, t0))
    sampler.daemon = True
    sampler.start()
    child = subprocess.Popen([sys.executable, "-c", BOOT, argfile], cwd=work, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    emit("started", pid=child.pid)
    lines = [0]
    stall = ARGS.get("stall") or {}
    stall_rx = [re.compile(x) for x in stall.get("patterns") or []]
    progress_rx = [re.compile(x) for x in stall.get("progress") or []]
    fatal = []  # [(seconds, line)] of the stall line; clock[0]: when the stall clock last started
    clock = [0.0]

    def pump():
        fd = os.open(ARGS["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as log:
            for raw in iter(child.stdout.readline, b""):
                text = raw.decode("utf-8", "replace").rstrip("\n")
                now = time.monotonic() - t0
                log.write("%.3f %s\n" % (now, text))
                log.flush()
                lines[0] += 1
                if not fatal and any(rx.search(text) for rx in stall_rx):
                    fatal.append((now, text[:300]))
                    clock[0] = now
                elif fatal and any(rx.search(text) for rx in progress_rx):
                    clock[0] = now
    reader = threading.Thread(target=pump)
    reader.daemon = True
    reader.start()
    deadline = t0 + float(ARGS.get("deadline_s", 600))
    timed_out = False
    stalled = None
    stall_s = float(stall.get("seconds") or 0)
    while child.poll() is None:
        if time.monotonic() > deadline:
            timed_out = True
            break
        if fatal and stall_s and time.monotonic() - t0 > clock[0] + stall_s:
            stalled = list(fatal[0])
            break
        time.sleep(0.2)
    if timed_out or stalled or child.poll() is None:
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
            try:
                os.killpg(child.pid, sig)
            except OSError:
                pass
            try:
                child.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    # what verl left in the child's group (Ray's raylet and workers when ray.shutdown did not run)
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass
    # the rest of the child's output; a process outside its group (a setsid() daemon, Ray's raylet)
    # can hold the pipe open until the supervisor ends it, so stop once nothing came for 0.5 s
    end, seen = time.monotonic() + 5.0, -1
    while reader.is_alive() and time.monotonic() < end and lines[0] != seen:
        seen = lines[0]
        reader.join(0.5)
    stop.set()
    sampler.join(5.0)
    emit("done", returncode=child.returncode, seconds=round(time.monotonic() - t0, 3), timed_out=timed_out,
         lines=lines[0], stalled=stalled)


main()
