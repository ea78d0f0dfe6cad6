"""Small helpers shared by tests (not fixtures)."""

from preflight.runner import run


def rows(ctx, stages):
    """Run ``stages`` on ``ctx``; return {result id: Result}."""
    return {r.id: r for r in run(ctx, list(stages))}


def report_schema():
    """The published report schema (preflight/schema/report-1.json), read as the package reads it."""
    from preflight.report.jsonreport import load_schema

    return load_schema()


def validate_report(doc):
    """Validate a JSON report (dict or text) against the published schema with the jsonschema
    library (an independent validator); return the dict. Raises jsonschema.ValidationError."""
    import json

    import jsonschema

    if isinstance(doc, (str, bytes)):
        doc = json.loads(doc)
    schema = report_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    cls(schema, format_checker=cls.FORMAT_CHECKER).validate(doc)
    return doc


def plant_start_hook(site, code, name="pf_planted_hook"):
    """Make ``code`` (Python source) run whenever an interpreter whose site-packages is ``site`` (a
    directory path) starts with its site module: ``<name>.py`` and a ``<name>.pth`` line that
    imports it. Returns the module's path.

    Not a ``sitecustomize.py``: where the distribution's own sits in the standard library
    (Debian's and Ubuntu's python3: /usr/lib/python3.X/sitecustomize.py), it comes first on
    sys.path and one in a venv's site-packages never runs.
    """
    import os

    path = os.path.join(str(site), name + ".py")
    with open(path, "w") as fh:
        fh.write(code)
    with open(os.path.join(str(site), name + ".pth"), "w") as fh:
        fh.write("import %s\n" % name)
    return path
