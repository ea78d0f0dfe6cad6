"""Both Dockerfiles (the repository's and the one ``image`` writes) as a platform engineer would
ship them: no health check that touches the GPUs, the base image pinned by the matrix digest, a
non-root user, the base image's own Python when the stack runs on it; hadolint passes."""

import argparse
import os
import re
import subprocess

import pytest

from preflight import matrix
from preflight.outputs.dockerfile import ImageSpec, base_reference, render_dockerfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def hadolint():
    import shutil
    import sys

    return shutil.which("hadolint") or os.path.join(os.path.dirname(sys.executable), "hadolint")


def _rows():
    return matrix.load().curated["base_images"]["base"]


def _instructions(text):
    """(instruction, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#")))
    return [tuple((l.strip().split(None, 1) + [""])[:2]) for l in joined.splitlines() if l.strip()]


def _check_shape(text):
    ins = _instructions(text)
    names = [i for i, _ in ins]
    assert "HEALTHCHECK" not in names
    users = [a for i, a in ins if i == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    uid = users[-1].split(":")[0]
    assert re.search(r"useradd .*--uid %s\b" % uid, text)
    return ins


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["variant"])
def test_generated_dockerfile_for_every_base_image(row, tmp_path):
    text = render_dockerfile(ImageSpec(base=row, python=row["python"], verl="0.9.1", tool_version="0.1.0"))
    ins = _check_shape(text)
    frm = [a for i, a in ins if i == "FROM"]
    assert frm == [base_reference(row)]
    if row.get("digest"):
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", row["digest"]) and frm[0].endswith("@" + row["digest"])
        assert row["digest_confidence"] in ("V", "S", "U") and row["digest_source"]
    else:
        assert "none pinned" in text  # said so, not silently unpinned
    # the base image's own Python: no third-party archive
    assert "add-apt-repository" not in text and "python%s -m venv" % row["python"] in text
    (tmp_path / "Dockerfile").write_text(text)
    lint = subprocess.run([hadolint(), str(tmp_path / "Dockerfile")], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    assert lint.returncode == 0, lint.stdout


def test_top_level_dockerfile_pins_the_matrix_digest():
    text = open(os.path.join(ROOT, "Dockerfile")).read()
    _check_shape(text)
    default = re.search(r"^ARG CUDA_IMAGE=(\S+)$", text, re.M).group(1)
    cu130 = [r for r in _rows() if r["variant"] == "cu130"][0]
    assert default == base_reference(cu130)


def test_image_prefers_the_base_image_python():
    """Without --python, the image's Python is the base image's own when the stack runs on it
    (verl 0.9.1 admits 3.10-3.12; the cu130 base image is Ubuntu 24.04 with 3.12)."""
    from preflight.commands import image, stack

    p = argparse.ArgumentParser()
    stack.add_stack_options(p)
    args = p.parse_args(["--verl", "0.9.1", "--gpu", "H200", "--driver", "580.95.05"])
    said = []
    image.prefer_base_python(args, said.append)
    _, res, _, _ = stack.resolve_stack(args)
    row = [r for r in _rows() if r["variant"] == res.variant][0]
    assert res.ok and res.python == row["python"] == "3.12"


def _sources(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("source", "digest_source") and isinstance(v, str):
                yield v
            else:
                yield from _sources(v)
    elif isinstance(node, list):
        for v in node:
            yield from _sources(v)


def test_matrix_sources_can_be_read_by_anyone():
    """Every matrix source either names something public (a URL, owner/repo#N, a commit, a
    package's files on PyPI) or a file of this repository that exists; never only a file
    outside it (like the reference notes the rows were curated from)."""
    import glob

    import tomllib

    public = re.compile(r"https?://|[\w.-]+/[\w.-]+#\d+|@[0-9a-f]{7,}|\b#\d+|\bPyPI\b|release notes|docs|README|"
                        r"RELEASE\.md|METADATA|wheel|developer\.nvidia|public|[\w-]+/[\w.-]+ repository", re.I)
    bad = []
    for path in sorted(glob.glob(os.path.join(ROOT, "matrices", "*.toml"))):
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
        for src in _sources(data):
            local = re.findall(r"(?<![\w/])((?:[\w.-]+/)*[\w.-]+\.md)\b", src)
            missing = [f for f in local if not os.path.exists(os.path.join(ROOT, f))
                       and not os.path.exists(os.path.join(ROOT, "matrices", f))]
            if missing and not public.search(src):
                bad.append("%s: %s" % (os.path.basename(path), src))
    assert not bad, "\n".join(bad)
