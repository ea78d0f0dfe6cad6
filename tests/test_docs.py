"""The README and docs/ against the command line itself: each command's page names every option its
parser has, and every option its tables name is one the parser has; the README stays a short front
page whose links reach every page of docs/, and every link into docs/ (anchors included) resolves."""

import argparse
import os
import re

import pytest

from preflight.cli import build_parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def _options(parser):
    """The option strings of each documented option of ``parser`` and of its own subcommands
    (``matrix show``): [("-q", "--quiet"), ...]."""
    out = [tuple(a.option_strings) for a in parser._actions
           if a.option_strings and a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
    for sub in _subparsers(parser).values():
        out += _options(sub)
    return out


COMMANDS = _subparsers(build_parser())


def _page(name):
    return os.path.join(DOCS, "commands", name + ".md")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_page_names_the_options_of_its_parser(name):
    text = _read(_page(name))
    if "placeholder" in text.split("\n\n", 2)[1]:
        pytest.skip("docs/commands/%s.md is a placeholder" % name)
    options = _options(COMMANDS[name])
    missing = [o[-1] for o in options if not any(re.search(r"`[^`]*%s\b" % re.escape(s), text) for s in o)]
    assert not missing, "docs/commands/%s.md does not name %s" % (name, missing)
    # options named in the page's tables (a row's first cell) are the parser's, or, for the stack options
    # a page takes from spec's, spec's
    own = {s for o in options + (_options(COMMANDS["spec"]) if "spec.md#options" in text else []) for s in o}
    named = set()
    for row in re.findall(r"^\| (`[^|]*)\|", text, re.M):
        named.update(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", row))
    assert not named - own, "docs/commands/%s.md names options %s has not" % (name, sorted(named - own))


def test_every_command_has_a_page_linked_from_the_readme():
    readme = _read(os.path.join(ROOT, "README.md"))
    for name in COMMANDS:
        assert os.path.isfile(_page(name)), name
        assert "(docs/commands/%s.md)" % name in readme, name


def _anchors(text):
    """GitHub's heading anchors of a Markdown page."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def _doc_pages():
    for dirpath, _dirs, files in os.walk(DOCS):
        for fn in files:
            if fn.endswith(".md"):
                yield os.path.join(dirpath, fn)


def test_every_link_into_docs_resolves_and_every_page_is_reachable():
    pages = [os.path.join(ROOT, "README.md")] + sorted(_doc_pages())
    reached, broken = set(), []
    for page in pages:
        for target in LINK.findall(_read(page)):
            if "://" in target or target.startswith("#"):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(page), path))
            if not full.startswith(DOCS + os.sep):
                continue  # a file of the repository outside docs/
            if not os.path.isfile(full) or (anchor and anchor not in _anchors(_read(full))):
                broken.append("%s -> %s" % (os.path.relpath(page, ROOT), target))
            reached.add(full)
    assert not broken, broken
    assert sorted(set(_doc_pages()) - reached) == []


def test_the_readme_is_a_short_front_page_with_the_quickstart():
    text = _read(os.path.join(ROOT, "README.md"))
    assert len(text.encode("utf-8")) < 15 * 1024
    quick = text.split("## Quickstart", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [ln.split("#", 1)[0].strip() for ln in quick.splitlines() if ln.strip()]
    assert len(commands) == 2 and "tools/build_pyz.py" in commands[0], commands  # build and run the checker
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as fh:
        assert re.search(r"^(exec )?%s$" % re.escape(commands[1]), fh.read(), re.M)  # CI runs the test command
