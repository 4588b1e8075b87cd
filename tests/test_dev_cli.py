"""dev.py's command line: a mistyped command says so in one line, shows the usage and exits
non-zero; --help shows the usage and exits 0 (neither creates or touches .venv)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _dev(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, str(ROOT / "dev.py"), *args], capture_output=True, text=True, timeout=60
  )


def test_unknown_command_names_it_and_shows_the_usage():
  result = _dev("mian")
  assert result.returncode == 2
  assert result.stderr.splitlines()[0] == "unknown command: mian"
  assert "python3 dev.py main" in result.stderr and result.stdout == ""


def test_no_command_shows_the_usage_and_fails():
  result = _dev()
  assert result.returncode == 2 and "unknown command" not in result.stderr
  assert "python3 dev.py test" in result.stderr


def test_help_shows_the_usage():
  result = _dev("--help")
  assert result.returncode == 0 and "python3 dev.py main" in result.stdout
  assert "python3 dev.py mpi " in result.stdout  # the MPI stack: one step after main (issue 49)
