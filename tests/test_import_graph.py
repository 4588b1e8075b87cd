"""No import circle in ``minmaxlab/`` or ``experiments/``.

The graph is built with ``ast`` from the source files: a module's edges are every module of
the two packages that it imports, at module level or inside a function (a lazy import hides
a circle from Python, not from this test). ``import a.b`` and ``from a import b`` with ``a.b``
a module are edges to ``a.b``; ``from a import name`` (not a module) is an edge to ``a``
(its ``__init__``); a relative import is resolved against the importing module. Any
strongly connected component of more than one module fails the test, naming a circle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("minmaxlab", "experiments")


def modules(root: Path, packages=PACKAGES) -> dict[str, tuple[Path, bool]]:
  """Dotted module name -> (file, is a package ``__init__``)."""
  out = {}
  for pkg in packages:
    for f in sorted((root / pkg).rglob("*.py")):
      parts = list(f.relative_to(root).with_suffix("").parts)
      is_pkg = parts[-1] == "__init__"
      out[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
  return out


def _known(name: str, known) -> str | None:
  """The longest prefix of ``name`` that is a known module."""
  parts = name.split(".")
  while parts and ".".join(parts) not in known:
    parts.pop()
  return ".".join(parts) or None


def imports(module: str, source: str, is_pkg: bool, known) -> set[str]:
  """The known modules that ``source`` (the text of ``module``) imports, anywhere in it."""
  found = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import):
      targets = [_known(a.name, known) for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        here = module.split(".") if is_pkg else module.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join(here + ([node.module] if node.module else []))
      targets = [
        f"{base}.{a.name}" if f"{base}.{a.name}" in known else _known(base, known)
        for a in node.names
      ]
    else:
      continue
    found.update(t for t in targets if t and t != module)
  return found


def graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
  known = modules(root, packages)
  return {m: imports(m, f.read_text(), pkg, known) for m, (f, pkg) in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
  """One circle (a path returning to its start) per strongly connected component of more
  than one module (Tarjan's algorithm, iterative)."""
  index, low, on_stack, stack, comps = {}, {}, set(), [], []
  for start in sorted(edges):
    if start in index:
      continue
    work = [(start, iter(sorted(edges[start])))]
    index[start] = low[start] = len(index)
    stack.append(start)
    on_stack.add(start)
    while work:
      v, it = work[-1]
      w = next(it, None)
      if w is not None:
        if w not in index:
          index[w] = low[w] = len(index)
          stack.append(w)
          on_stack.add(w)
          work.append((w, iter(sorted(edges.get(w, ())))))
        elif w in on_stack:
          low[v] = min(low[v], index[w])
        continue
      work.pop()
      if work:
        low[work[-1][0]] = min(low[work[-1][0]], low[v])
      if low[v] == index[v]:
        comp = set()
        while True:
          w = stack.pop()
          on_stack.discard(w)
          comp.add(w)
          if w == v:
            break
        if len(comp) > 1:
          comps.append(comp)
  return [_cycle_in(comp, edges) for comp in comps]


def _cycle_in(comp: set[str], edges) -> list[str]:
  """A shortest circle through the first module of ``comp`` (breadth-first)."""
  start = min(comp)
  parent, frontier = {start: None}, [start]
  while frontier:
    nxt = []
    for v in frontier:
      for w in sorted(edges[v] & comp):
        if w == start:
          path = [v]
          while parent[path[-1]] is not None:
            path.append(parent[path[-1]])
          return [*reversed(path), start]
        if w not in parent:
          parent[w] = v
          nxt.append(w)
    frontier = nxt
  raise AssertionError(f"no circle in the component {sorted(comp)}")


def test_no_import_circle():
  found = circles(graph())
  text = "\n".join(" -> ".join(c) for c in found)
  assert not found, f"import circles (move the shared pieces to the lower module):\n{text}"


def _write(root: Path, files: dict[str, str]) -> None:
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_graph_finds_lazy_relative_and_package_circles(tmp_path):
  _write(
    tmp_path,
    {
      "experiments/__init__.py": "",
      "experiments/a.py": "def f():\n  from experiments import b\n",  # function-level
      "experiments/b.py": "from . import a\n",  # relative
      "experiments/c.py": "import experiments.d\n",
      "experiments/d.py": "X = 1\n",
      "experiments/pkg/__init__.py": "from experiments.pkg.low import Y\n",
      "experiments/pkg/low.py": "from experiments.pkg import Z\n",  # a name of the package
      "experiments/pkg/ok.py": "from experiments.pkg import low\n",  # a submodule: no circle
      "minmaxlab/__init__.py": "",
    },
  )
  edges = graph(tmp_path)
  assert edges["experiments.c"] == {"experiments.d"}
  assert edges["experiments.pkg.ok"] == {"experiments.pkg.low"}
  found = circles(edges)
  assert ["experiments.a", "experiments.b", "experiments.a"] in found
  assert ["experiments.pkg", "experiments.pkg.low", "experiments.pkg"] in found
  assert len(found) == 2


def test_a_three_module_circle_is_named_in_order():
  edges = {"m.x": {"m.y"}, "m.y": {"m.z"}, "m.z": {"m.x", "m.w"}, "m.w": set()}
  assert circles(edges) == [["m.x", "m.y", "m.z", "m.x"]]
  assert circles({"m.x": {"m.y"}, "m.y": set()}) == []
