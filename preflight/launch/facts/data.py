"""matrices/launch_facts.toml, read once: the limits and per-release features the launch facts
weigh when the installed package's own value cannot be read in the target."""

from typing import Any, Dict

__all__ = ["load_facts"]

_DATA: Dict[str, Any] = {}


def load_facts() -> Dict[str, Any]:
    """``matrices/launch_facts.toml`` parsed (cached). Raises MatrixError when missing or malformed."""
    if not _DATA:
        from ...matrix import MatrixError, read_data

        try:  # Python >= 3.11
            import tomllib as _toml
        except ImportError:  # pragma: no cover - 3.8-3.10
            import tomli as _toml  # type: ignore[no-redef]
        raw = read_data("launch_facts.toml")
        if raw is None:
            raise MatrixError("matrix file launch_facts.toml not found; rebuild the zipapp or restore matrices/")
        try:
            _DATA.update(_toml.loads(raw.decode("utf-8")))
        except ValueError as exc:
            raise MatrixError("matrix file launch_facts.toml is not valid TOML: %s; restore it" % exc)
    return _DATA
