"""Code a newcomer reads in one pass: no function of `minmaxlab/` or `experiments/` over
MAX_FUNCTION_LINES lines (a config getter, `get_config`, may be longer), no file over
MAX_FILE_LINES lines.

Today's exceptions are listed below, each with why it remains; the lists may only shrink: an
entry that is now within the limit (or no longer exists) fails the test, so a refactor that
shortens a function removes its entry in the same commit. A function is named by its path and
qualified name (`Class.method`, `outer.inner`); its length counts from its `def` line to its last
line (decorators excluded), as `ast` reports them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("minmaxlab", "experiments")
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 450
CONFIG_GETTERS = frozenset({"get_config"})

# Functions over the limit today (issue 36 shortens them; remove an entry once it is short).
ALLOWED_LONG_FUNCTIONS: frozenset[str] = frozenset()

# Files over the limit today (remove an entry once the file is short).
ALLOWED_LONG_FILES: frozenset[str] = frozenset()


def _sources():
  for package in PACKAGES:
    for path in sorted((ROOT / package).rglob("*.py")):
      yield path.relative_to(ROOT).as_posix(), path.read_text()


def _functions(tree):
  """(qualified name, bare name, lines) of every function in `tree`, nested ones included."""
  found = []

  def walk(node, prefix):
    for child in ast.iter_child_nodes(node):
      if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
        name = prefix + child.name
        found.append((name, child.name, child.end_lineno - child.lineno + 1))
        walk(child, name + ".")
      elif isinstance(child, ast.ClassDef):
        walk(child, prefix + child.name + ".")
      else:
        walk(child, prefix)

  walk(tree, "")
  return found


def _measure():
  long_functions, long_files = {}, {}
  for rel, source in _sources():
    lines = len(source.splitlines())
    if lines > MAX_FILE_LINES:
      long_files[rel] = lines
    for name, bare, length in _functions(ast.parse(source)):
      if length > MAX_FUNCTION_LINES and bare not in CONFIG_GETTERS:
        long_functions[f"{rel}::{name}"] = length
  return long_functions, long_files


def test_functions_are_short():
  long_functions, _ = _measure()
  new = {k: v for k, v in long_functions.items() if k not in ALLOWED_LONG_FUNCTIONS}
  assert not new, f"functions over {MAX_FUNCTION_LINES} lines (split into named parts): {new}"


def test_files_are_short():
  _, long_files = _measure()
  new = {k: v for k, v in long_files.items() if k not in ALLOWED_LONG_FILES}
  assert not new, f"files over {MAX_FILE_LINES} lines (split by concept): {new}"


def test_allow_lists_are_not_stale():
  long_functions, long_files = _measure()
  stale = ALLOWED_LONG_FUNCTIONS - set(long_functions) | ALLOWED_LONG_FILES - set(long_files)
  stale = sorted(stale)
  assert not stale, f"now within the limit (remove from the allow-list): {stale}"
