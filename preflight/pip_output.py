"""Reading pip's refusal from its output: the explanation in one line, the packages it found no
distribution for, and whether its resolver refused the set (which proves the set does not install)
or pip stopped for another reason (which proves nothing)."""

import re
from typing import Any, List, Sequence, Tuple

__all__ = ["failure_facts", "short_error", "refused_by_resolver", "RESOLVER_REFUSALS"]


def failure_facts(lines: Sequence[str]) -> Tuple[str, List[str]]:
    """(pip's explanation, one line; the packages it found no matching distribution for) from
    pip's output ``lines``."""
    why: List[str] = []
    for i, line in enumerate(lines):
        if "The conflict is caused by" in line:
            why = [x.strip() for x in lines[i:i + 12] if x.strip() and not x.startswith("To fix")]
            break
    errs = [x.strip() for x in lines if x.startswith(("ERROR", "error:")) or x.lstrip().startswith("\u00d7")]
    text = short_error(" ".join(why + errs))[-1500:]
    names = set(re.findall(r"No matching distribution found for ([A-Za-z0-9_.\-]+(?:[<>=!~]=?[^\s;]+)?)", text))
    # a conflict whose every candidate "depends on X" with no version: X has no usable distribution
    deps = re.findall(r"depends on ([A-Za-z0-9_.\-]+)(?=\s|$)", " ".join(why))
    names |= {d for d in deps if deps.count(d) >= 1 and not re.search(r"depends on %s\s*[<>=!~]" % re.escape(d),
                                                                        " ".join(why))}
    return text, sorted(names)


#: pip's list of versions for another Python; linear in its length (each item's text stops at ';', a
#: newline or " ERROR:", so no failed match is retried from every item: the old lazy form took 50 s
#: on a 2,000-version list followed by another error line)
_IGNORED = re.compile(r"(?:ERROR: Ignored the following versions that require a different python version: )?"
                      r"((?:[\w.+!-]+ Requires-Python (?:(?! ERROR:)[^;\n])*; )*"
                      r"[\w.+!-]+ Requires-Python (?:(?! ERROR:)[^;\n])*?)(?= ERROR:|\s*$|;|\n)")


def short_error(text: str) -> str:
    """pip's refusal ``text`` with its list of every version "that require[s] a different python
    version" (hundreds of ``X Requires-Python >=3.10``; recorded rows hold its tail) cut to how
    many there were and the last one: "pip ignored 212 versions that require a different Python
    (the last: 9.1.0 Requires-Python >=3.11)"."""
    def one(m: Any) -> str:
        items = m.group(1).split("; ")
        return "pip ignored %d%s versions that require a different Python (the last: %s)" % (
            len(items), "" if m.group(0).startswith("ERROR") else "+", items[-1].strip())
    return _IGNORED.sub(one, text or "")


#: What pip prints when its resolver refuses a set, and the refusal's name: no candidate for a
#: requirement, a conflict (ResolutionImpossible), Requires-Python, or the resolver giving up
#: after its round limit (ResolutionTooDeep: pip's "resolution-too-deep" error, so ``pip install``
#: of the line fails the same way).
RESOLVER_REFUSALS = (("resolution-too-deep", "ResolutionTooDeep"),
                     ("Dependency resolution exceeded maximum depth", "ResolutionTooDeep"),
                     ("ResolutionImpossible", "ResolutionImpossible"),
                     ("The conflict is caused by", "ResolutionImpossible"),
                     ("No matching distribution found", "no matching distribution"),
                     ("Could not find a version that satisfies", "no matching distribution"),
                     ("requires a different Python", "requires a different Python"))


def refused_by_resolver(lines: Sequence[str], names: Sequence[str] = ()) -> str:
    """How pip's resolver refused the set in pip's output ``lines`` ("ResolutionTooDeep",
    "ResolutionImpossible", "no matching distribution", "requires a different Python"; the set
    "does not install"), or "" when pip stopped for another reason (its own crash, "No space left
    on device", a killed process), which proves nothing about the set. ``names``: packages pip
    found no distribution for (a refusal even without pip's wording)."""
    text = "\n".join(lines)
    for words, name in RESOLVER_REFUSALS:
        if words in text:
            return name
    return "no matching distribution" if names else ""
