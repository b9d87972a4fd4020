"""The layers of docs/architecture.md hold: import-linter's contracts in pyproject.toml."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
