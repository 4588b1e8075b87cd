"""Test set-up: 4 fake CPU devices and XLA's quicker CPU code generation before JAX starts
(tests/_xla.py: the whole session, its workers and the processes its tests start compile
with it, at LLVM -O0 but in the files marked ``optimized_code``; ``MINMAXLAB_TEST_CODEGEN=default``
keeps XLA's defaults), one compilation cache per
session, shared fixtures, the order of the tests, and a session-end check that no test left
a process behind.

The first pytest process (the xdist controller, or the only process) makes a fresh folder
for JAX's persistent compilation cache and the stored programs
(``MINMAXLAB_CACHE_DIR``, unless already set) and removes it at the end: every worker (the
cache is turned on in each, ``runner.enable_compilation_cache``) and every process a test
starts (the experiments' ``main``, benchmarks) shares it, so a program compiled by one is
loaded by the next, on any host as in CI, and the user's own cache
(``~/.cache/minmaxlab``) is neither read nor filled. Tests that time or count cold
compiles set a folder of their own.

Every pytest process (the xdist workers included) marks the environment its
children inherit with ``MINMAXLAB_TEST_OWNER=<its pid>``; at the end of the
session any live process still carrying this process's mark (a child, or an
orphaned grandchild re-parented to init) is listed, killed, and fails the run.
"""

import collections
import os
import shutil
import signal
import sys
import tempfile

from tests import _xla  # imports no JAX

os.environ.setdefault("JAX_NUM_CPU_DEVICES", "4")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")
OWNER = "MINMAXLAB_TEST_OWNER"
os.environ[OWNER] = str(os.getpid())
CACHE = "MINMAXLAB_CACHE_DIR"  # runner.compilation_cache_dir()
_SESSION_CACHE = None  # the folder this process made (and removes at the end)
if CACHE not in os.environ:
  _SESSION_CACHE = os.environ[CACHE] = tempfile.mkdtemp(prefix="minmaxlab-test-cache-")
# every program is stored, not only those over 0.1 s (runner.enable_compilation_cache): a
# worker loads the small ones the other worker, a process a test started or another jit of
# the same function compiled before (tests of runner.stored_program keep the library's 0.1 s:
# tests/runner/conftest.py)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
_FLAGS = _xla.session_flags(os.environ)  # XLA's quicker CPU code (tests/_xla.py)
if _FLAGS is not None:
  os.environ["XLA_FLAGS"] = _FLAGS
if _xla.low_effort(os.environ):  # LLVM at -O0 but in files marked optimized_code
  os.environ[_xla.LOW_EFFORT] = "1"

import jax  # noqa: E402
import pytest  # noqa: E402

from minmaxlab import runner  # noqa: E402
from tests import _procs  # noqa: E402

# this process (the only one, or an xdist worker) reads and fills the session's cache too: a
# program that two test files compile alike is compiled once per session
runner.enable_compilation_cache()


def pytest_configure(config):
  config.addinivalue_line(
    "markers",
    "optimized_code: the file's programs (and the processes its tests start) compile at"
    " LLVM -O1, not the session's -O0 (tests/_xla.py: files that run their programs long)",
  )


@pytest.fixture(scope="module", autouse=True)
def _optimized_code(request):
  """A file marked ``optimized_code`` compiles at -O1 (tests/_xla.py)."""
  if request.node.get_closest_marker("optimized_code") is None:
    yield
    return
  with _xla.optimized_code():
    yield


@pytest.fixture
def x64():
  """Run a test in float64 (for comparisons with numpy references)."""
  with jax.enable_x64(True):
    yield


@pytest.fixture
def key():
  return jax.random.key(0)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  """The files holding a ``slow`` test first, then the others, each group from the file
  with the most tests down; each file's tests kept together and in order. With ``dev.py
  test`` (xdist, one file per unit of work) the longest files start first and the last
  units are short, so the workers finish together."""
  slow = {item.path for item in items if item.get_closest_marker("slow")}
  count = collections.Counter(item.path for item in items)
  # a stable sort: files with equal keys keep their order, and a file's tests theirs
  items.sort(key=lambda item: (item.path not in slow, -count[item.path]))


def leftover_processes() -> list[int]:
  """Live processes started (directly or not) by this pytest process."""
  if not sys.platform.startswith("linux"):
    return []
  return _procs.pids_with_env(OWNER, str(os.getpid()))


_WORKER_LEFTOVERS: list[str] = []  # on the xdist controller: what its workers reported


def pytest_testnodedown(node, error):  # xdist: a worker finished
  _WORKER_LEFTOVERS.extend(getattr(node, "workeroutput", {}).get("leftover_processes", []))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
  if _SESSION_CACHE is not None:
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)
  config = session.config
  if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
    if _WORKER_LEFTOVERS:  # the xdist controller: its workers checked their own children
      session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return
  # a process the last test killed may still be exiting: a few seconds to end on its own
  left = _procs.wait_gone(leftover_processes(), timeout=3.0)
  if not left:
    return
  lines = [" ".join(_procs._cmdline(pid))[:200] for pid in left]
  for pid in left:
    try:
      os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass
  sys.stderr.write(
    f"\nERROR: the tests left {len(left)} process(es) running (now killed):\n"
    + "".join(f"  pid {pid}: {line}\n" for pid, line in zip(left, lines))
  )
  session.exitstatus = pytest.ExitCode.TESTS_FAILED
  if hasattr(config, "workerinput"):
    config.workeroutput["leftover_processes"] = lines
