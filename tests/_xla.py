"""The XLA code generation of a test session.

The suite compiles hundreds of programs and runs most of them for a few steps, so XLA's
compile time is most of its time. A test session therefore compiles with XLA's quicker CPU
code generation, ``SESSION`` (LLVM at -O1 and XLA's classic elemental emitters: the library's
``compile="fastest"``, ``minmaxlab.distributed.compiler_options``; and each program's machine
code generated on one thread, ``SERIAL_CODEGEN``; LLVM at -O0 was tried and
cost several times the CPU in the tests that train for a while, e.g. 207 vs 28 CPU-s for the
shrunk Fashion-MNIST LAGAN run). It is
put in ``XLA_FLAGS`` by tests/conftest.py before JAX starts, so that every xdist worker and
every process a test starts compiles the same way. The code is as deterministic as XLA's
default code and computes the same operations, but its floats may round differently.

What depends on XLA's default code is checked with it: a program whose bits are pinned (the
saved step fingerprints, two layouts compared bit for bit, the HLO a benchmark counts) is
compiled with ``compiler_options=DEFAULTS`` (a program's options override ``XLA_FLAGS``), and
a child process that must compile everything with the defaults (a notebook's kernel, a
compile that must last long enough to be interrupted) gets :func:`default_env`.

On top of ``SESSION``, most of the suite compiles with LLVM at -O0 (``LOW_EFFORT``: JAX's
``jax_disable_most_optimizations``, which also turns off LLVM's expensive passes; set in the
environment by tests/conftest.py, so the processes the tests start inherit it). Most tests
compile many programs and run each a few times, where -O0's shorter compile wins (the
``session_low_effort`` arm of docs/running.md's table). A test file that runs its
programs for long (training, FID) is marked ``pytestmark = pytest.mark.optimized_code``: its
programs, and the processes its tests start, compile with ``SESSION``'s -O1
(tests/conftest.py turns ``LOW_EFFORT`` off for the file).

``MINMAXLAB_TEST_CODEGEN=default python3 dev.py test`` runs the whole suite with XLA's
defaults (no flag added, ``LOW_EFFORT`` not set).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

CODEGEN = "MINMAXLAB_TEST_CODEGEN"  # "fastest" (the default: SESSION) or "default"
FASTEST = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}
# XLA CPU splits each program's LLVM module into up to 32 parts compiled on parallel threads.
# The session's two workers keep both cores busy, so the split only adds work: one part costs
# fewer CPU seconds in the suite (docs/running.md). Programs whose bits are pinned compile
# with DEFAULTS, which restore XLA's split.
SERIAL_CODEGEN = {"xla_cpu_parallel_codegen_split_count": 1}
SESSION = {**FASTEST, **SERIAL_CODEGEN}
# XLA's own values of the same options (xla/debug_options_flags.cc): compiling with them gives
# the code (and the bits) of a process without XLA_FLAGS
DEFAULTS = {
  "xla_backend_optimization_level": 3,
  "xla_cpu_use_fusion_emitters": True,
  "xla_cpu_parallel_codegen_split_count": 32,
  # LOW_EFFORT turns LLVM's expensive passes off; XLA's default keeps them
  "xla_llvm_disable_expensive_passes": False,
}
# JAX's switch (read from the environment when JAX starts, and jax.config's flag of the same
# name after): every program compiled at LLVM -O0 with LLVM's expensive passes off, unless its
# compiler_options say otherwise
LOW_EFFORT = "JAX_DISABLE_MOST_OPTIMIZATIONS"
LOW_EFFORT_FLAG = "jax_disable_most_optimizations"


def as_flags(options: Mapping[str, bool | int]) -> list[str]:
  """``{"xla_backend_optimization_level": 1}`` -> ``["--xla_backend_optimization_level=1"]``."""
  return [f"--{name}={str(value).lower()}" for name, value in options.items()]


def session_flags(environ: Mapping[str, str]) -> str | None:
  """The ``XLA_FLAGS`` of a test session started with ``environ``: the user's flags followed
  by ``SESSION``'s (``None``: leave ``XLA_FLAGS`` as it is). ``SESSION`` is not added under
  ``MINMAXLAB_TEST_CODEGEN=default``, nor when the flags already name one of its options.

  Raises:
    ValueError: ``MINMAXLAB_TEST_CODEGEN`` is neither ``fastest`` nor ``default``.
  """
  codegen = environ.get(CODEGEN, "fastest")
  if codegen not in ("fastest", "default"):
    raise ValueError(f"{CODEGEN} must be 'fastest' or 'default', got {codegen!r}")
  user = environ.get("XLA_FLAGS", "")
  if codegen == "default" or any(name in user for name in SESSION):
    return None
  return " ".join([*user.split(), *as_flags(SESSION)])


def low_effort(environ: Mapping[str, str]) -> bool:
  """Whether a test session started with ``environ`` sets ``LOW_EFFORT`` (the default): not
  under ``MINMAXLAB_TEST_CODEGEN=default``, nor when the user set ``LOW_EFFORT`` already."""
  return environ.get(CODEGEN, "fastest") == "fastest" and LOW_EFFORT not in environ


@contextlib.contextmanager
def jax_low_effort(on: bool) -> Iterator[None]:
  """JAX's ``LOW_EFFORT_FLAG`` set to ``on`` in this process for the block (the programs
  compiled in it), its former value after; the environment is left as it is."""
  import jax  # not at import: tests/conftest.py sets the environment before JAX starts

  before = jax.config.values[LOW_EFFORT_FLAG]
  jax.config.update(LOW_EFFORT_FLAG, on)
  try:
    yield
  finally:
    jax.config.update(LOW_EFFORT_FLAG, before)


@contextlib.contextmanager
def optimized_code() -> Iterator[None]:
  """In a session with ``LOW_EFFORT`` set: ``LOW_EFFORT`` off for the block, in this
  process's JAX (programs compiled in it) and in ``os.environ`` (processes started in it);
  set again after. Without ``LOW_EFFORT``: nothing changes."""
  if os.environ.get(LOW_EFFORT) != "1":
    yield
    return
  os.environ[LOW_EFFORT] = "0"
  try:
    with jax_low_effort(False):
      yield
  finally:
    os.environ[LOW_EFFORT] = "1"


def default_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
  """``environ`` (default ``os.environ``) with ``SESSION``'s flags taken out of ``XLA_FLAGS``
  and without ``LOW_EFFORT``: a child process started with it compiles with XLA's defaults
  (and the user's own flags)."""
  env = dict(os.environ if environ is None else environ)
  env.pop(LOW_EFFORT, None)
  ours = set(as_flags(SESSION))
  kept = [flag for flag in env.get("XLA_FLAGS", "").split() if flag not in ours]
  if kept:
    env["XLA_FLAGS"] = " ".join(kept)
  else:
    env.pop("XLA_FLAGS", None)
  return env


@contextlib.contextmanager
def lowerings() -> Iterator[list[str]]:
  """The programs JAX lowers in the block (each then compiled or loaded), one entry each,
  filled as they come: ``with lowerings() as lowered: ...; assert lowered == []``."""
  import jax

  lowered: list[str] = []

  def listen(event, seconds, **kwargs):
    if event.endswith("jaxpr_to_mlir_module_duration"):
      lowered.append(str(kwargs.get("fun_name", "?")))

  jax.monitoring.register_event_duration_secs_listener(listen)
  try:
    yield lowered
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)
