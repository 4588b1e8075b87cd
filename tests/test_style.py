"""The tree is formatted and lint-clean (`ruff format`, `ruff check`, settings in
pyproject.toml; ruff is pinned in the dev extra because its formatting changes between
releases). Run `ruff format . && ruff check --fix .` to fix a failure."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["format", "--check"], ["check"]], ids=["format", "check"])
def test_ruff(command):
  result = subprocess.run(
    [sys.executable, "-m", "ruff", *command, "."],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
