"""The tree is formatted and lint-clean (`ruff format`, `ruff check`, settings in
pyproject.toml; ruff is pinned in the dev extra because its formatting changes between
releases). Run `ruff format . && ruff check --fix .` to fix a failure."""

import sys
from pathlib import Path

import pytest

from tests import _procs

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["format", "--check"], ["check"]], ids=["format", "check"])
def test_ruff(command):
  result = _procs.run(
    [sys.executable, "-m", "ruff", *command, "."],
    cwd=ROOT,
    timeout=300,
  )
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
