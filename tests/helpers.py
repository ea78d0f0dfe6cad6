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
