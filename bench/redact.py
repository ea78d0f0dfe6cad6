"""Redaction time on adversarial inputs (fault e12: the old redactor was quadratic, 100 KB ran for
minutes). Prints seconds per input at 10 KB, 100 KB and 1 MB: linear time means about 10x per
row. Run: python3 bench/redact.py"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from preflight.redact import redact  # noqa: E402

CASES = {
    "word run": "a", "assignments": "a=", "colons": "a: ", "schemes": "http://", "userinfo": "a://b:",
    "options": "--a ", "quotes": "PASSWORD='", "escaped quotes": '\\"', "secret keys": "api_key=",
    "dashes": "-", "dots": "x.", "bearer": "Bearer ", "words": "word ", "tokens": "hf_",
    "at signs": "http://a@", "blocks": "password: |\n", "indented": "  api_tokens:\n", "pairs": "('HF_TOKEN', ",
    "xml": "<password>", "curl -u": "curl -u a:", "mysql -p": "mysql -pa ", "weak keys": "x.wandb_key=a.b ",
}


def main() -> None:
    sizes = (10_000, 100_000, 1_000_000)
    print("%-16s %s" % ("input", "  ".join("%9s" % ("%d KB" % (n // 1000)) for n in sizes)))
    for name, unit in CASES.items():
        row = []
        for n in sizes:
            s = unit * (n // len(unit))
            t0 = time.perf_counter()
            redact({"NCCL_BIG": s, "text": s})
            row.append(time.perf_counter() - t0)
        print("%-16s %s" % (name, "  ".join("%8.3fs" % t for t in row)))


if __name__ == "__main__":
    main()
