"""Records with more than two fields are built by keyword: `Pool(params=..., opt=..., ...)`,
never `Pool(params, opt, ...)`, whose meaning hangs on the order of the fields.

A record is a class of `minmaxlab/` that subclasses `NamedTuple` or is a dataclass
(`dataclasses.dataclass`, `flax.struct.dataclass`, `chex.dataclass`); its fields are its annotated
class attributes (`ClassVar`s, `init=False` fields and keyword-only ones excluded), with those
of a record it subclasses. A two-field record (`Players(min, max)`) may stay positional, as optax's
`GradientTransformation(init, update)` pair does.

Checked with `ast` over `minmaxlab/`, `experiments/`, `tests/` and `examples/`: a call
`Name(...)` or `module.Name(...)` with a positional argument (a `*args` included) where `Name` is
such a record and is bound to `minmaxlab` in that file: a class of that file, a name imported from
`minmaxlab` (or, in `minmaxlab/`, a relative import), or an attribute of a module imported from
there. Names of other libraries that happen to match (a local `Batch`, say) are left alone. The
calls that remain positional are listed below with why; an entry that no longer occurs fails the
test."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = "minmaxlab"
SCANNED = ("minmaxlab", "experiments", "tests", "examples")
MAX_POSITIONAL_FIELDS = 2
DATACLASS_DECORATORS = frozenset(
  {
    "dataclass",
    "dataclasses.dataclass",
    "struct.dataclass",
    "flax.struct.dataclass",
    "chex.dataclass",
  }
)
# (file, record) pairs built positionally on purpose.
ALLOWED = frozenset(
  {
    # `LookaheadConfig` is by design `lookahead_minmax`'s arguments in their order
    # (`lookahead_minmax(inner, *config)`); `LookaheadConfig(*config)` takes a plain tuple too.
    ("minmaxlab/transforms/_lookahead_scan.py", "LookaheadConfig"),
  }
)


def _dotted(node) -> str:
  """`a.b.c` for a Name/Attribute chain, "" for anything else."""
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Attribute):
    base = _dotted(node.value)
    return f"{base}.{node.attr}" if base else ""
  return ""


def _is_dataclass(cls: ast.ClassDef) -> bool:
  for decorator in cls.decorator_list:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if _dotted(target) in DATACLASS_DECORATORS:
      return True
  return False


def _is_namedtuple(cls: ast.ClassDef) -> bool:
  return any(_dotted(base) in ("NamedTuple", "typing.NamedTuple") for base in cls.bases)


def _keyword_only(cls: ast.ClassDef) -> bool:
  """A `dataclass(kw_only=True)`: Python itself refuses its positional construction."""
  return any(
    keyword.arg == "kw_only" and isinstance(keyword.value, ast.Constant) and keyword.value.value
    for decorator in cls.decorator_list
    if isinstance(decorator, ast.Call)
    for keyword in decorator.keywords
  )


def _own_fields(cls: ast.ClassDef) -> list[str]:
  """The class's annotated attributes that may be passed by position."""
  fields = []
  if _keyword_only(cls):
    return fields
  for statement in cls.body:
    if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
      continue
    annotation = ast.unparse(statement.annotation)
    if annotation.split("[")[0].split(".")[-1] == "ClassVar":
      continue
    if annotation.split(".")[-1] == "KW_ONLY":
      break  # the rest are keyword-only already
    value = statement.value
    if isinstance(value, ast.Call) and _dotted(value.func).split(".")[-1] == "field":
      init = next((k.value for k in value.keywords if k.arg == "init"), None)
      if isinstance(init, ast.Constant) and init.value is False:
        continue
    fields.append(statement.target.id)
  return fields


def record_fields(sources: dict[str, str]) -> dict[str, dict[str, list[str]]]:
  """{path: {class name: fields}} of the record classes of `sources` ({path: source}). A base
  class is looked up by name, in the same file first (private helpers of two modules may share a
  name)."""
  trees = {path: ast.parse(source) for path, source in sources.items()}
  classes = {
    path: {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for path, tree in trees.items()
  }

  def lookup(path, name):
    if name in classes[path]:
      return path, classes[path][name]
    return next(((p, found[name]) for p, found in classes.items() if name in found), None)

  def fields(path, cls, seen):
    inherited = None
    for base in cls.bases:
      found = lookup(path, _dotted(base).split(".")[-1])
      if found and found[1] not in seen:
        inherited = inherited or fields(*found, seen | {cls})
    if not (_is_namedtuple(cls) or _is_dataclass(cls) or inherited is not None):
      return None
    return (inherited or []) + _own_fields(cls)

  records = {}
  for path, found in classes.items():
    records[path] = {}
    for name, cls in found.items():
      names = fields(path, cls, frozenset())
      if names is not None:
        records[path][name] = names
  return records


def _library_bindings(tree: ast.Module, in_library: bool) -> tuple[set[str], set[str]]:
  """(names, modules) bound to the library in `tree`: names imported from it (or classes defined
  here) and local names of its modules."""
  names, modules = set(), set()
  for node in ast.walk(tree):
    if isinstance(node, ast.ClassDef) and in_library:
      names.add(node.name)
    elif isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.split(".")[0] == LIBRARY:
          modules.add(alias.asname or LIBRARY)
    elif isinstance(node, ast.ImportFrom):
      from_library = (node.module or "").split(".")[0] == LIBRARY and not node.level
      if from_library or (node.level and in_library):
        for alias in node.names:
          # A module or a class: either way the local name is bound to the library.
          names.add(alias.asname or alias.name)
          modules.add(alias.asname or alias.name)
  return names, modules


def _fields_of(records: dict[str, dict[str, list[str]]], path: str, name: str) -> list[str]:
  """The fields of record `name` as seen from `path`: its own class first, else the longest
  record of that name in the library."""
  if name in records.get(path, {}):
    return records[path][name]
  return max((found[name] for found in records.values() if name in found), key=len, default=[])


def positional_record_calls(
  path: str, source: str, records: dict[str, dict[str, list[str]]]
) -> list[tuple[ast.Call, str, list[str]]]:
  """(call, name, fields) of each call in `source` (the file `path`) that builds a record of more
  than MAX_POSITIONAL_FIELDS fields with a positional argument, in the order of the source."""
  tree = ast.parse(source)
  names, modules = _library_bindings(tree, in_library=path in records)
  found = []
  for node in ast.walk(tree):
    if not (isinstance(node, ast.Call) and node.args):
      continue
    func = node.func
    if isinstance(func, ast.Name) and func.id in names:
      name = func.id
    elif isinstance(func, ast.Attribute) and _dotted(func.value).split(".")[0] in modules:
      name = func.attr
    else:
      continue
    fields = _fields_of(records, path, name)
    if len(fields) > MAX_POSITIONAL_FIELDS:
      found.append((node, name, fields))
  return sorted(found, key=lambda item: (item[0].lineno, item[0].col_offset))


def _sources(packages) -> dict[str, str]:
  return {
    path.relative_to(ROOT).as_posix(): path.read_text()
    for package in packages
    for path in sorted((ROOT / package).rglob("*.py"))
  }


def _offenders(sources, records, allowed=frozenset()) -> list[str]:
  return [
    f"{path}:{call.lineno}: {name}(...) ({len(fields)} fields)"
    for path, source in sources.items()
    for call, name, fields in positional_record_calls(path, source, records)
    if (path, name) not in allowed
  ]


def test_records_are_built_by_keyword():
  records = record_fields(_sources([LIBRARY]))
  assert len(records["minmaxlab/coevolution/_training.py"]["CellSpec"]) > 2  # the scan sees them
  sources = _sources(SCANNED)
  stale = ALLOWED - {
    (path, name)
    for path, source in sources.items()
    for _, name, _ in positional_record_calls(path, source, records)
  }
  assert not stale, f"no longer built positionally (remove from ALLOWED): {sorted(stale)}"
  offenders = _offenders(sources, records, ALLOWED)
  assert not offenders, (
    f"records of more than {MAX_POSITIONAL_FIELDS} fields built with positional arguments "
    "(name each field: `Record(field=value, ...)`):\n  " + "\n  ".join(offenders)
  )


_LIBRARY_MODULE = """\
import dataclasses
from typing import ClassVar, NamedTuple

class Pair(NamedTuple):
  min: int
  max: int

class Triple(NamedTuple):
  a: int
  b: int
  c: int

class Longer(Triple):
  def total(self):
    return self.a + self.b + self.c

@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
  a: int
  b: int
  c: int

@dataclasses.dataclass(frozen=True)
class Settings:
  name: str
  size: int
  shared: ClassVar[int] = 0
  cache: dict = dataclasses.field(init=False)

class Plain:
  x: int
  y: int
  z: int

def build(xs):
  return Pair(1, 2), Triple(a=1, b=2, c=3), Triple(*xs), Settings("a", 1), Plain(1, 2, 3)
"""

_CLIENT_MODULE = """\
import minmaxlab.lib as lib
from minmaxlab.lib import Longer
from other import Triple
lib.Triple(1, 2, c=3)
Longer(a=1, b=2, c=3)._replace(a=0)
Longer(1, b=2, c=3)
Triple(1, 2, 3)  # another library's Triple
lib.Pair(1, 2)
"""


def test_checker_flags_positional_records_and_leaves_the_rest_alone():
  sources = {"minmaxlab/lib.py": _LIBRARY_MODULE, "tests/test_lib.py": _CLIENT_MODULE}
  records = record_fields({"minmaxlab/lib.py": _LIBRARY_MODULE})
  assert records == {
    "minmaxlab/lib.py": {
      "Pair": ["min", "max"],
      "Triple": ["a", "b", "c"],
      "Longer": ["a", "b", "c"],
      "Options": [],
      "Settings": ["name", "size"],
    }
  }
  assert _offenders(sources, records) == [
    "minmaxlab/lib.py:36: Triple(...) (3 fields)",
    "tests/test_lib.py:4: Triple(...) (3 fields)",
    "tests/test_lib.py:6: Longer(...) (3 fields)",
  ]
