"""One resolution's state (:class:`Run`) and the helpers that record citations and problems."""

from typing import Any, Dict, Optional

from packaging.version import Version

from ..matrix import Matrix


RANK = {"V": 0, "S": 1, "U": 2}


WORD = {"V": "primary", "S": "secondary", "U": "unverified"}


class Run:
    """State of one resolution: the inputs, the verl row, and the chosen/observed facts."""

    def __init__(self, mx: Matrix, verl: str, backend: str, driver: Optional[str], cc: Optional[str],
                 gpu: Optional[str], python: Optional[str], prefer: Optional[str], build: Optional[str] = None,
                 arch: str = "x86_64"):
        self.mx, self.verl, self.backend, self.build, self.arch = mx, verl, backend, build, arch
        self.driver, self.cc, self.gpu, self.python, self.prefer = driver, cc, gpu, python, prefer
        self.row = mx.verl(verl) or {}
        self.meta = self.row.get("_meta") or {}
        self.extra = (self.row.get("backend_extras") or {}).get(backend)
        self.failed_proofs: Dict[str, str] = {}  # backend release -> why its recorded platform resolve failed
        self.minors = sorted({m for r in mx.curated["wheels"].get("torch_python", []) for m in r["python"]},
                             key=Version)


def cite(ev: Dict[str, Any], choice: str, value: Any, row: str, source: str, conf: str) -> None:
    ev["citations"].append({"choice": choice, "value": str(value), "row": row, "source": source,
                            "confidence": conf or "V"})


def bname(run: Run) -> str:
    return {"vllm": "vLLM", "sglang": "SGLang"}.get(run.backend, run.backend)


def conf_flag(row: Optional[Dict[str, Any]]) -> str:
    conf = (row or {}).get("confidence", "V")
    return "" if conf == "V" else " [%s: %s row]" % (conf, WORD[conf])


def add_problem(ev: Dict[str, Any], kind: str, text: str) -> None:
    ev["problems"].append(text)
    ev["kinds"].add(kind)
    ev["fail"] = True
