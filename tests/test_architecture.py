"""The packages' import direction (docs/architecture.md): no module imports "up".

Every subpackage of ``minmaxlab`` has a level; a module imports only its own
package and packages of a LOWER level (lazy imports inside functions
included), and nothing in ``minmaxlab`` imports ``experiments`` or ``tests``.
So ``transforms`` knows nothing of populations, ``gan.metrics`` nothing of the
runner's checkpoints, and ``coevolution`` nothing of how it is distributed.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# package -> level; docs/architecture.md's picture draws the same table.
LEVELS = {
  "games": 0,
  "transforms": 1,
  "analysis": 2,
  "gan": 2,  # models, losses, data, metrics: may import each other (losses -> models)
  "runner": 2,
  "coevolution": 3,
  "distributed": 4,
  "pbt": 4,
}


def _package(dotted: str) -> str | None:
  """The ``minmaxlab`` subpackage a dotted module name belongs to (None: the top level)."""
  parts = dotted.split(".")
  return parts[1] if len(parts) > 1 and parts[0] == "minmaxlab" else None


def imported_modules(source: str, module: str) -> list[str]:
  """Absolute dotted names of every module ``source`` imports (relative ones
  resolved against ``module``; ``from a import b`` gives ``a.b``), lazy ones included."""
  found = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import):
      found += [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        pkg = module.split(".")[: -node.level]
        base = ".".join([*pkg, base] if base else pkg)
      found += [f"{base}.{a.name}" for a in node.names]
  return found


def _modules() -> list[tuple[str, str]]:
  """``(dotted module name, source)`` of every module of the library."""
  out = []
  for path in sorted(ROOT.glob("minmaxlab/**/*.py")):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    out.append((".".join(parts), path.read_text()))
  return out


def upward_imports(modules) -> list[str]:
  bad = []
  for module, source in modules:
    own = _package(module)
    for name in imported_modules(source, module):
      top = name.split(".")[0]
      if top in ("experiments", "tests"):
        bad.append(f"{module} imports {name}")
        continue
      target = _package(name)
      if top != "minmaxlab" or own is None or target is None or target == own:
        continue
      if target not in LEVELS:  # ``from minmaxlab import __version__`` etc.
        continue
      if LEVELS[target] >= LEVELS[own]:
        bad.append(f"{module} (level {LEVELS[own]}) imports {name} (level {LEVELS[target]})")
  return bad


# Modules allowed to import each other (one side lazily, inside a function): none today. An
# entry whose cycle is gone fails the test too, so the allowance never outlives its cause.
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def import_cycles(modules) -> set[tuple[str, ...]]:
  """Every cycle of the module import graph (lazy imports included) as a sorted tuple of
  its modules; an import of a package (``__init__``) counts as an import of that package."""
  names = {m for m, _ in modules}
  edges = {}
  for module, source in modules:
    out = set()
    for name in imported_modules(source, module):
      while name and name not in names:
        name = name.rpartition(".")[0]
      if name and name != module:
        out.add(name)
    edges[module] = out
  cycles, state, stack = set(), {}, []

  def visit(u):
    state[u] = 1
    stack.append(u)
    for v in sorted(edges.get(u, ())):
      if state.get(v) == 1:
        cycles.add(tuple(sorted(stack[stack.index(v) :])))
      elif v in edges and not state.get(v):
        visit(v)
    stack.pop()
    state[u] = 2

  for u in sorted(edges):
    if not state.get(u):
      visit(u)
  return cycles


def test_every_subpackage_has_a_level():
  packages = {p.parent.name for p in ROOT.glob("minmaxlab/*/__init__.py")}
  assert packages == set(LEVELS), sorted(packages ^ set(LEVELS))


def test_no_module_imports_up():
  modules = _modules()
  assert len(modules) > 50
  bad = upward_imports(modules)
  assert not bad, "imports against the architecture's direction:\n" + "\n".join(bad)


def test_no_import_cycles():
  cycles = import_cycles(_modules())
  new = sorted(cycles - KNOWN_CYCLES)
  assert not new, f"modules that import each other: {new}"
  stale = sorted(KNOWN_CYCLES - cycles)
  assert not stale, f"allowed cycles that no longer exist (remove them): {stale}"
  pair = [("pkg.a", "from pkg import b\n"), ("pkg.b", "def f():\n  from pkg.a import x\n")]
  assert import_cycles(pair + [("pkg", "")]) == {("pkg.a", "pkg.b")}


def test_the_check_sees_lazy_relative_and_from_imports():
  src = (
    "import minmaxlab.pbt\n"
    "from minmaxlab.gan import metrics\n"
    "from . import _y\n"
    "def f():\n  from minmaxlab.runner import CheckpointManager\n"
  )
  assert imported_modules(src, "minmaxlab.transforms._x") == [
    "minmaxlab.pbt",
    "minmaxlab.gan.metrics",
    "minmaxlab.transforms._y",
    "minmaxlab.runner.CheckpointManager",
  ]


@pytest.mark.parametrize(
  "module,source",
  [
    ("minmaxlab.transforms._x", "from minmaxlab.gan import losses\n"),
    ("minmaxlab.gan.metrics._x", "def f():\n  from minmaxlab.runner import CheckpointManager\n"),
    ("minmaxlab.coevolution._x", "import minmaxlab.distributed\n"),
    ("minmaxlab.games._x", "from experiments import _cli\n"),
  ],
)
def test_an_upward_import_is_caught(module, source):
  assert len(upward_imports([(module, source)])) == 1
  # The same module importing downwards (or within its own package) passes.
  assert upward_imports([(module, "from minmaxlab.games import Players\nfrom . import _y\n")]) == []
