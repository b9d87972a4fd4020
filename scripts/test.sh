#!/usr/bin/env bash
# Install everything and run the whole test suite (what CI runs).
# PostgreSQL tests use postgresql://postgres@127.0.0.1:5432/test (override: CORRAL_TEST_PG).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest "$@"
