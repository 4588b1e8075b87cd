"""The parity tables' column "checked against the original's output" names tests that exist.

Every ``tests/parity/<file>.py::<test>`` named on these pages (and in the Lipizzaner reader's
``CHECKED_AGAINST``) is a test function of that file, found with :mod:`ast` (no import, no
collection); each parity table has the column."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = ("experiments/gan/README.md", "experiments/coevolution/README.md", "docs/parity.md")
COLUMN = "checked against the original's output"
_NAMED = re.compile(r"(tests/parity/[\w/]+\.py)::(\w+)")


def _tests_of(path: Path) -> set[str]:
  tree = ast.parse(path.read_text())
  return {
    n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
  }


def missing_tests(text: str) -> list[str]:
  """The ``path::name`` ids in ``text`` whose file or test function does not exist."""
  out = []
  for path, name in _NAMED.findall(text):
    file = REPO / path
    if not file.is_file() or name not in _tests_of(file):
      out.append(f"{path}::{name}")
  return out


@pytest.mark.parametrize("page", PAGES)
def test_every_named_parity_test_exists(page):
  text = (REPO / page).read_text()
  assert _NAMED.search(text), f"{page} names no parity test"
  assert missing_tests(text) == [], page


def test_the_readers_checked_against_names_existing_tests():
  from experiments.coevolution import lipizzaner_config as lip

  named = [f"{lip.GOLDEN_TESTS}{t}" for tests in lip.CHECKED_AGAINST.values() for t in tests]
  assert named and missing_tests(" ".join(named)) == []
  assert set(lip.CHECKED_AGAINST) <= set(lip.FIELDS)


@pytest.mark.parametrize(
  ("page", "header"),
  [
    ("experiments/gan/README.md", "| reference | this study | where it is set |"),
    ("experiments/coevolution/README.md", "| Lipizzaner field | minmaxlab | how | note |"),
    ("experiments/coevolution/README.md", "| rule | when | the tracked learning rate |"),
  ],
)
def test_each_parity_table_has_the_column(page, header):
  lines = [ln for ln in (REPO / page).read_text().splitlines() if ln.startswith(header)]
  assert lines and all(COLUMN in ln for ln in lines), (page, header)


def test_the_check_finds_a_test_that_does_not_exist():
  text = (
    "`tests/parity/test_lipizzaner_golden.py::test_training_phase`, "
    "`tests/parity/test_lipizzaner_golden.py::test_no_such_test`, "
    "`tests/parity/test_no_such_file.py::test_x`"
  )
  assert missing_tests(text) == [
    "tests/parity/test_lipizzaner_golden.py::test_no_such_test",
    "tests/parity/test_no_such_file.py::test_x",
  ]
