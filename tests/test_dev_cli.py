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


def test_the_mpi_install_route_is_the_documented_one():
  """dev.py installs MPI by the two pip steps README.md and docs/running.md give (so CI's
  `dev.py test` runs the users' route): the MPICH wheel first, then the mpi extra."""
  import importlib.util

  spec = importlib.util.spec_from_file_location("dev_module", ROOT / "dev.py")
  dev = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(dev)
  first, second = dev.MPI_ROUTE
  assert first == ["mpich"] and second[-1] == ".[mpi]", dev.MPI_ROUTE
  commands = [f"pip install {' '.join(first)}", f'pip install {" ".join(second[:-1])} ".[mpi]"']
  for doc in ("README.md", "docs/running.md"):
    lines = [line.split("#")[0].strip() for line in (ROOT / doc).read_text().splitlines()]
    at = [lines.index(c) for c in commands]  # each step alone on its line, in this order
    assert at[1] == at[0] + 1, (doc, at)
