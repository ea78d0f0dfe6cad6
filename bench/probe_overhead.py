"""What a probe costs: the supervised probe (probes/process.py) against a bare subprocess, and how
much a flooding probe costs the checker. Prints figures; asserts nothing.

    python3 bench/probe_overhead.py [N]
"""

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from preflight.probes.process import run_argv, run_script  # noqa: E402


def median_ms(fn, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    bare = median_ms(lambda: subprocess.run(["true"]), n)
    sup = median_ms(lambda: run_argv(["true"], timeout=10), n)
    info_bare = median_ms(lambda: subprocess.run([sys.executable, "-c", "import sys, json, platform"]), n)
    info = median_ms(lambda: run_script(sys.executable, "info", timeout=30), n)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(n):
        run_argv(["true"], timeout=10)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)) / n * 1000
    print("probe overhead (median of %d, %d CPUs):" % (n, os.cpu_count() or 1))
    print("  CPU time of one supervised 'true' (the supervisor's interpreter start): %.1f ms" % cpu)
    print("  'true': bare subprocess %.1f ms, supervised probe %.1f ms (+%.1f ms)" % (bare, sup, sup - bare))
    print("  info probe: %.1f ms (a bare interpreter start with its imports: %.1f ms)" % (info, info_bare))
    d = tempfile.mkdtemp()
    site = os.path.join(d, "sitecustomize.py")
    with open(site, "w") as fh:
        fh.write("import os\nb = b'F' * 1000000 + b'\\n'\nwhile True:\n    os.write(1, b)\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    out = run_script(sys.executable, "info", timeout=5, env={"PYTHONPATH": d})
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("  flooding probe, 5 s deadline: read %.2f GB in %.1f s; checker peak RSS %d -> %d MiB" % (
        out.stdout_bytes / 1e9, took, before // 1024, after // 1024))


if __name__ == "__main__":
    main()
