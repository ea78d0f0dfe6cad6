"""environment.json cites the matrix rows of what was locked (new-user review: with --torch 2.13.0
--torch-index none it cited the default stack's torch 2.11.0 and its cu130 variant row). The
resolution's own citations are the input; the stack written beside them is the truth."""

from preflight.outputs.spec import cited_rows
from preflight.resolve import resolve


def test_a_given_torch_and_index_replace_the_default_rows(matrix):
    res = resolve(matrix, "0.9.1", _options=False)
    default = [c for c in res.citations if c["choice"] == "torch"]
    assert default and default[0]["value"] != "2.13.0"  # the case: the default differs from the one given
    stack = {"torch": "2.13.0", "variant": "pip configuration", "overrides": {"torch": "2.13.0", "torch_index": "none"}}
    rows = {c["choice"]: c for c in cited_rows(res.citations, stack)}
    assert rows["torch"]["value"] == "2.13.0" and rows["torch"]["row"] == "--torch (given)"
    if "torch variant" in rows:
        assert rows["torch variant"]["value"] == "pip configuration"
    # nothing given: the resolution's rows stand, unchanged
    same = {"torch": default[0]["value"], "variant": res.variant, "overrides": {}}
    assert cited_rows(res.citations, same) == res.citations
