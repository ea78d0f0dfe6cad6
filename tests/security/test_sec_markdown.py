"""Mechanism "one escape for user text in Markdown" (F11): every user-derived value the Markdown
report shows goes through ``report.markdown._text`` (HTML entities for ``& < > "``, Markdown
punctuation backslash-escaped) or into a code span; the rendered HTML (markdown-it-py, raw HTML
on as GitHub allows) of a report built from hostile values holds only the tags the tool puts there
and no link, image or attribute."""

import os
import subprocess
import sys
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from preflight.report import Report
from preflight.report.markdown import render
from preflight.result import Result, Status

WRONG = pytest.mark.fault("WRONG")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: every tag the renderer itself makes
OWN_TAGS = {"h3", "p", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "code", "strong",
            "details", "summary", "em"}
HOSTILE = ["x|y</td><img src=x onerror=alert(1)>[login](http://evil.example)",
           "![pic](http://evil.example/p.png)", "<script>alert(1)</script>", "<a href='http://evil.example'>hi</a>",
           "[ref]: http://evil.example", "<http://evil.example>", "&lt;img src=x&gt;", "**bold** _it_ ~~s~~",
           "</summary></details><iframe src=//evil.example>", "`code` ``", "<!-- c --> <?php ?>",
           "[a]\n(http://evil.example)", "x\\](http://evil.example)"]


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs = set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += attrs

    def handle_comment(self, data):
        self.tags.add("<!--")

    def handle_pi(self, data):
        self.tags.add("<?")


def _html_problems(md):
    html = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough").render(md)
    t = _Tags()
    t.feed(html)
    bad = sorted(t.tags - OWN_TAGS)
    return bad + ["%s=%s" % a for a in t.attrs], html


def _report(v):
    rows = [Result("c.%s" % v, "config", Status.FAIL, "msg %s" % v, fix="fix %s" % v),
            Result(v, "config", Status.WARN, v, fix=v), Result(v, "config", Status.PASS, v),
            Result("s" + v, "config", Status.SKIP, v)]
    return Report(rows, ["config"], target={"python": v, "version": v}, verl={"version": v, "chosen_by": v},
                  machine={"host": {"os": {"name": v}, "arch": v, "glibc": v, "cpu": {"usable": v}},
                           "nvml": {"devices": [{"name": v, "capability": v}], "driver": v}},
                  tool_version=v, matrix_version=v, command="config")


@WRONG
@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_values_make_no_tag_or_link(value):
    md = render(_report(value))
    bad, html = _html_problems(md)
    assert not bad, (bad, md, html)


def test_the_check_can_fail_and_values_stay_readable():
    bad, _ = _html_problems("x <img src=x> [a](http://e)")
    assert "img" in bad and "a" in bad and "href=http://e" in bad
    md = render(_report("a_b [c] <d> & e|f"))
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "a_b [c] &lt;d&gt; &amp; e" in html  # shown as written, not interpreted


@WRONG
def test_config_markdown_of_the_reviewed_override():
    value = "x|y</td><img src=x onerror=alert(1)>[login](http://evil.example)"
    p = subprocess.run([sys.executable, "-m", "preflight", "config", "--verl", "0.9.1", "--timeout", "5", "--format",
                        "markdown", "--", "+trainer.projct_name=%s" % value], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert p.returncode in (0, 1) and "verl-preflight config" in p.stdout, p.stderr[-2000:]
    bad, html = _html_problems(p.stdout)
    assert not bad, (bad, p.stdout)
