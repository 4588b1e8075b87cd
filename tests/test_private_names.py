"""No experiment reads a private name (``_name``) of another module: what a script needs from
another module is that module's public, documented API.

Checked with ``ast`` over ``experiments/``: ``module._name`` where ``module`` is an imported
module of ``experiments`` or ``minmaxlab``, and ``from module import _name`` where ``_name`` is
not itself a module (the experiments' shared private modules, e.g. ``experiments._report``, are
imported as modules). Today's exceptions are listed with why they remain; an entry that no
longer occurs fails the test."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("experiments", "minmaxlab")

# (file, "module._name") pairs that remain.
ALLOWED: set[tuple[str, str]] = set()


def _is_private(name: str) -> bool:
  return name.startswith("_") and not name.startswith("__")


def _is_module(dotted: str) -> bool:
  return (ROOT / Path(*dotted.split("."))).with_suffix(".py").exists() or (
    ROOT / Path(*dotted.split(".")) / "__init__.py"
  ).exists()


def private_names(source: str) -> set[str]:
  """``module._name`` read in ``source`` (see the module docstring), as dotted names."""
  tree = ast.parse(source)
  modules = {}
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.split(".")[0] in PACKAGES:
          local = alias.asname or alias.name.split(".")[0]
          modules[local] = alias.name if alias.asname else local
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      if node.module.split(".")[0] not in PACKAGES:
        continue
      for alias in node.names:
        dotted = f"{node.module}.{alias.name}"
        if _is_module(dotted):
          modules[alias.asname or alias.name] = dotted
        elif _is_private(alias.name):
          found.add(dotted)
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and _is_private(node.attr):
      value = node.value
      if isinstance(value, ast.Name) and value.id in modules:
        dotted = f"{modules[value.id]}.{node.attr}"
        if not _is_module(dotted):
          found.add(dotted)
  return found


def test_the_scanner_sees_attributes_and_from_imports():
  src = (
    "from experiments.pbt import train\nimport experiments.gan.train as gtrain\n"
    "from experiments import _report\nfrom experiments.stats import _holm\n"
    "train._fmt(1)\ngtrain._programs()\n_report.register\ntrain.format_value(1)\n"
  )
  assert private_names(src) == {
    "experiments.pbt.train._fmt",
    "experiments.gan.train._programs",
    "experiments.stats._holm",
  }
  assert importlib.util.find_spec("experiments._report") is not None


def test_no_experiment_reads_a_private_name_of_another_module():
  found = set()
  for path in sorted((ROOT / "experiments").rglob("*.py")):
    rel = path.relative_to(ROOT).as_posix()
    found |= {(rel, name) for name in private_names(path.read_text())}
  new = sorted(found - ALLOWED)
  assert not new, f"private names read from another module (make them public): {new}"
  stale = sorted(ALLOWED - found)
  assert not stale, f"allowed entries that no longer occur (remove them): {stale}"
