"""pyproject.toml declares what the code needs: dependency floors that cover the APIs it
uses, the build backend that reads its license string, the extras, the typing marker.

The floors are checked against a table of first versions of the APIs found in the source
(each verified against the released wheels): a new use of such an API with an older
floor fails here, and so does a floor lowered below one in use.
"""

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# (package, first version providing it, regex of the use in the source)
FIRST_VERSIONS = [
  ("jax", "0.6.1", r"\bjax\.shard_map\("),
  ("optax", "0.2.5", r"\boptax\.tree\.[a-z_]+"),
  ("orbax-checkpoint", "0.11.0", r"options\.MultiprocessingOptions\("),
  ("tensorboardX", "2.6.2.2", r"\bSummaryWriter\("),  # 2.6.1 warns with current protobuf
]
# ... and in the tests (floors of the dev extra).
FIRST_VERSIONS_TESTS = [
  ("jax", "0.8.0", r"\bjax\.enable_x64\("),
]


def _version(text: str) -> tuple[int, ...]:
  parts = [int(x) for x in re.findall(r"\d+", text)[:3]]
  return tuple(parts + [0] * (3 - len(parts)))  # "0.11" == "0.11.0"


def _floors(requirements) -> dict[str, tuple[int, ...]]:
  out = {}
  for req in requirements:
    m = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*>=\s*([0-9.]+)", req)
    if m:
      out[m.group(1).lower().replace("_", "-")] = _version(m.group(3))
  return out


def _source() -> str:
  files = [
    *sorted((ROOT / "minmaxlab").rglob("*.py")),
    *sorted((ROOT / "experiments").rglob("*.py")),
  ]
  return "\n".join(p.read_text() for p in files)


def test_dependency_floors_cover_the_apis_in_use():
  floors = _floors(PYPROJECT["project"]["dependencies"])
  source = _source()
  for package, first, use in FIRST_VERSIONS:
    if re.search(use, source):
      floor = floors.get(package.lower())
      assert floor is not None, f"{package} is used ({use}) but has no floor"
      assert floor >= _version(first), (
        f"{package}>={'.'.join(map(str, floor))} but the code uses {use}, new in {first}"
      )


def test_dev_floors_cover_the_apis_the_tests_use():
  floors = _floors(PYPROJECT["project"]["optional-dependencies"]["dev"])
  source = "\n".join(p.read_text() for p in sorted((ROOT / "tests").glob("*.py")))
  for package, first, use in FIRST_VERSIONS_TESTS:
    if re.search(use, source):
      floor = floors.get(package.lower())
      assert floor is not None and floor >= _version(first), (
        f"the tests use {use} (new in {package} {first}): the dev extra needs {package}>={first}"
      )


@pytest.mark.parametrize("group", ["dependencies", "optional"])
def test_installed_versions_satisfy_the_floors(group):
  project = PYPROJECT["project"]
  if group == "dependencies":
    reqs = project["dependencies"]
  else:
    reqs = [r for name in ("dev", "tfds", "digits") for r in project["optional-dependencies"][name]]
  for name, floor in _floors(reqs).items():
    try:
      have = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      pytest.fail(f"{name} (declared >= {floor}) is not installed")
    assert _version(have) >= floor, f"{name} {have} is older than its floor {floor}"


def test_build_system_extras_and_typing_marker():
  setuptools = _floors(PYPROJECT["build-system"]["requires"])["setuptools"]
  if isinstance(PYPROJECT["project"].get("license"), str):  # an SPDX expression (PEP 639)
    assert setuptools >= (77, 0, 0)
  extras = PYPROJECT["project"]["optional-dependencies"]
  assert extras["cuda12"] == ["jax[cuda12]"] and extras["cuda13"] == ["jax[cuda13]"]
  assert any(r.startswith("scikit-learn") for r in extras["digits"])
  assert any(r.startswith("scikit-learn") for r in extras["dev"])  # the digits tests
  assert (ROOT / "minmaxlab" / "py.typed").exists()
  assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["minmaxlab"]
  # The main job's libraries are base dependencies (dev.py main installs nothing else).
  base = _floors(PYPROJECT["project"]["dependencies"])
  assert {"tensorboardx", "tqdm", "orbax-checkpoint", "matplotlib"} <= set(base)
  assert not {"mpi4py", "mpi4jax", "tensorflow-datasets", "pytest"} & set(base)


def test_mincheck_pins_exactly_the_declared_floors():
  """`python3 dev.py mincheck` (run by .ci/run) installs `name==floor` for every base
  dependency: the same floors this file reads, jaxlib with jax's, and none forgotten."""
  import importlib.util

  spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
  dev = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(dev)
  pins = dict(p.split("==") for p in dev.floor_pins())
  deps = PYPROJECT["project"]["dependencies"]
  floors = _floors(deps)
  assert len(floors) == len(deps)  # every base dependency has a floor
  assert {k.lower().replace("_", "-"): _version(v) for k, v in pins.items()} == {
    **floors,
    "jaxlib": floors["jax"],
  }
  assert "dev.py mincheck" in (ROOT / ".ci" / "run").read_text()
  assert (ROOT / ".ci" / "min_versions_smoke.py").exists()


def test_mincheck_refuses_a_dependency_without_a_floor(tmp_path):
  import importlib.util

  spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
  dev = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(dev)
  bad = tmp_path / "pyproject.toml"
  bad.write_text('[project]\ndependencies = ["jax>=0.6.1", "numpy"]\n')
  with pytest.raises(SystemExit, match="'numpy' in pyproject.toml has no >= floor"):
    dev.floor_pins(bad)
  bad.write_text('[project]\ndependencies = ["jax>=0.6.1", "numpy>=1.26,<3"]\n')
  assert dev.floor_pins(bad) == ["jax==0.6.1", "jaxlib==0.6.1", "numpy==1.26"]
