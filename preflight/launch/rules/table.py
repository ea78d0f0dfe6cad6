"""The rule table of ``matrices/verl_rules.toml``: which rule each release has, where it lives, and entry points."""

from typing import Any, Dict, Optional, Tuple
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from ...matrix import MatrixError, parse_version, read_data
try:  # Python >= 3.11
    import tomllib as _toml
except ImportError:  # pragma: no cover - exercised on 3.8-3.10
    import tomli as _toml  # type: ignore[no-redef]



_RULES: Dict[str, Any] = {}


def load_rules() -> Dict[str, Any]:
    """``matrices/verl_rules.toml`` parsed (cached). Raises MatrixError when missing or malformed."""
    if not _RULES:
        raw = read_data("verl_rules.toml")
        if raw is None:
            raise MatrixError("matrix file verl_rules.toml not found; rebuild the zipapp or restore matrices/")
        try:
            data = _toml.loads(raw.decode("utf-8"))
        except ValueError as exc:
            raise MatrixError("matrix file verl_rules.toml is not valid TOML: %s; restore it" % exc)
        for rs in data.get("ruleset", []):
            if not rs.get("source") or not rs.get("versions"):
                raise MatrixError("matrix file verl_rules.toml: a ruleset lacks versions or source; fix the row")
            SpecifierSet(rs["versions"])
        for ep in data.get("entry_point", []):
            if not all(ep.get(k) for k in ("module", "kind", "config_name", "source")):
                raise MatrixError("matrix file verl_rules.toml: an entry_point lacks module, kind, config_name or "
                                  "source; fix the row")
        _RULES.update(data)
    return _RULES


def ruleset(version: Optional[str]) -> Tuple[Dict[str, Any], str]:
    """(the ruleset covering verl ``version``, a note on how it was chosen).

    An unparseable or absent version gets the newest ruleset.
    """
    sets = load_rules()["ruleset"]
    pv = parse_version(version) if version else None
    if pv is None:
        return sets[-1], "verl release unknown: rules of %s" % sets[-1]["label"]
    v = Version(pv.base_version)
    for rs in sets:
        if SpecifierSet(rs["versions"]).contains(v, prereleases=True):
            rs = gated(rs, v)
            note = "rules of verl %s (%s)" % (rs["label"], rs["versions"])
            if v < Version("0.3"):
                note += "; rules before 0.3 are not recorded, 0.3's are used"
            return rs, note
    return sets[-1], "rules of %s" % sets[-1]["label"]


def gated(rs: Dict[str, Any], v: Version) -> Dict[str, Any]:
    """``rs`` with each flag written as a version specifier (``rollout_sync_rejected = ">=0.7"``:
    true from that release on, inside a ruleset that spans several) turned into a bool for ``v``, each
    ``by_version`` flag (``{flag: {specifier: value}}``) set where a specifier holds ``v``, and ``where``
    completed from ``where_versions`` (``{rule: {specifier: where}}``) for ``v``."""
    out = dict(rs)
    for k, val in rs.items():
        if k in GATED and isinstance(val, str):
            out[k] = SpecifierSet(val).contains(v, prereleases=True)
    for k, by_spec in (rs.get("by_version") or {}).items():  # ``[ruleset.by_version]``: {flag: {specifier: value}}
        for spec, val in by_spec.items():
            if SpecifierSet(spec).contains(v, prereleases=True):
                out[k] = val
                break
    per = rs.get("where_versions") or {}
    if per:  # ``[ruleset.where_versions.<rule>]``: specifier -> where, for rules whose code moved inside the ruleset
        where = dict(rs.get("where") or {})
        for rule, by_spec in per.items():
            where[rule] = next((text for spec, text in by_spec.items()
                                if SpecifierSet(spec).contains(v, prereleases=True)), where.get(rule, ""))
        out["where"] = where
    return out


#: Ruleset flags that may be a version specifier instead of a bool.
GATED = ("rollout_sync_rejected",)


def entry_point(entry: Optional[str]) -> Optional[Dict[str, Any]]:
    """The ``[[entry_point]]`` row of verl_rules.toml for a launch's program, or None when it is
    not one of verl's (a recipe, the user's own script) or absent.

    ``entry`` is a module (``verl.trainer.sft_trainer``) or a script path
    (``verl/trainer/main_ppo.py``, ``/src/verl/verl/trainer/fsdp_sft_trainer.py``).
    """
    if not entry:
        return None
    name = entry[:-3] if entry.endswith(".py") else entry
    name = name.replace("\\", "/").replace("/", ".").strip(".")
    for row in load_rules().get("entry_point", []):
        if name == row["module"] or name.endswith("." + row["module"]):
            return row
    return None
