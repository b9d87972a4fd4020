#!/usr/bin/env bash
# Install everything, check the layers and the types, and run the whole test suite (what CI runs).
# PostgreSQL tests use postgresql://postgres@127.0.0.1:5432/test (override: CORRAL_TEST_PG).
set -euo pipefail
cd "$(dirname "$0")/.."
# What apt installs (the Slurm testbed, the browser tests' Chromium, the container tests' Podman) comes in while pip
# fills the virtual environment: one after another, as apt takes one lock at a time.
system_log="$(mktemp)"
(
  # Slurm backend tests need a Slurm cluster: as root, install/start the single-node testbed
  # (scripts/slurm-testbed.sh; a few seconds when already up). CORRAL_SLURM_TESTBED=0 skips this.
  if [ "$(id -u)" = 0 ] && [ "${CORRAL_SLURM_TESTBED:-1}" != 0 ]; then
    bash scripts/slurm-testbed.sh start
  fi
  bash scripts/browser.sh     # the dashboard's browser tests drive Debian's headless Chromium
  bash scripts/containers.sh  # container jobs run under Debian's Podman, with runc and busybox-static
) > "$system_log" 2>&1 &
system=$!
bash scripts/install.sh
# A wrong arrow between layers (pyproject's import contracts) or a type error fails the run before any test.
checks_status=0
.venv/bin/lint-imports --no-cache && .venv/bin/mypy src/corral || checks_status=$?
system_status=0
wait "$system" || system_status=$?
cat "$system_log"
rm -f "$system_log"
[ "$checks_status" = 0 ] || exit "$checks_status"
[ "$system_status" = 0 ] || exit "$system_status"
# pytest keeps the test files it rewrote for its asserts only where Python may write bytecode: without that, each
# of the runs below and each of their workers would parse and rewrite all of them again.
unset PYTHONDONTWRITEBYTECODE
# Most tests wait on real servers and jobs, not on the CPU: five workers share the machine, a file each at a
# time, the files that take minutes first (tests/conftest.py); those that measure CPU share or pace, or share
# machine-wide state across files (marked serial, see tests/conftest.py), run afterwards, alone. Exit 5: none
# were selected. Each run prints its 25 slowest tests, so that the next slow one is seen when it comes.
.venv/bin/python -m pytest -n "${CORRAL_TEST_WORKERS:-5}" --dist loadfile --no-loadscope-reorder -m "not serial" --durations=25 "$@"
# The browser tests share no machine-wide state with each other: two workers of their own, without the MCP tests.
.venv/bin/python -m pytest -n 2 --dist loadfile -m serial tests/web --durations=25 "$@" || [ $? = 5 ]
.venv/bin/python -m pytest -m serial --ignore=tests/web --durations=25 "$@" || [ $? = 5 ]
