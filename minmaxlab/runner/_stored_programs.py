"""Compiled programs stored on disk, so a warm start skips tracing and lowering too.

JAX's persistent compilation cache saves XLA's compile, but it is keyed by the lowered
program: every new process still traces and lowers its jitted functions before it can
look the program up (for the main job's coevolution step, about 4 of the 14 seconds to
its first generation). :func:`stored_program` keys the compiled executable by what
decides the program instead (the experiment's config, the source code, the package
versions, JAX's settings, the devices and the arguments' types) and loads it without
tracing anything.

JAX serializes an executable as a pickle, and unpickling runs code: a file is read only
when its SHA-256 matches the one recorded in ``index.json`` next to it when this library
wrote it; any other file (planted, damaged, from an older version) is deleted and the
program compiled again. The folder is trusted as ssh trusts its keys (``_private_files``):
created 0700, its files 0600, and read only when it and they are owned by this user and
writable by no one else; anything else in it (a FIFO, a link, a read-only folder, a stale
file) costs one line and a compile, never a crash or a hang.

A program with effects (an MPI collective's ordered token, a host callback) is never stored:
it runs through its jit, as JAX's fast path for an ahead-of-time compiled program leaves the
token out (``Execution supplied 25 arguments but compiled program expected 26``).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import jax

from minmaxlab.runner._private_files import (
  folder_problem,
  make_private_folder,
  open_lock_file,
  read_private,
  write_private,
)

INDEX = "index.json"  # program file name -> SHA-256 of the file this library wrote
# Files kept per program name (older ones, e.g. from edited source code, are deleted).
KEEP_PER_NAME = 4
_VERSIONED = ("jax", "jaxlib", "numpy", "optax", "flax", "equinox", "ml_collections", "minmaxlab")
# JAX settings that change what a traced program computes.
_JAX_FLAGS = (
  "jax_enable_x64",
  "jax_default_matmul_precision",
  "jax_default_prng_impl",
  "jax_threefry_partitionable",
  "jax_numpy_dtype_promotion",
  "jax_numpy_rank_promotion",
  "jax_softmax_custom_jvp",
  "jax_disable_most_optimizations",  # LLVM -O0: other machine code, other bits
)


def source_digest(paths: Iterable[str | os.PathLike]) -> str:
  """SHA-256 of every ``*.py`` file under ``paths`` (folders or files): names and contents."""
  h = hashlib.sha256()
  for root in sorted(Path(p).resolve() for p in paths):
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    for f in files:
      h.update(str(f.relative_to(root.parent)).encode() + b"\0")
      h.update(f.read_bytes() + b"\0")
  return h.hexdigest()


def _versions() -> dict[str, str | None]:
  out = {}
  for name in _VERSIONED:
    try:
      out[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      out[name] = None
  return out


def _arg_types(args) -> list[str]:
  leaves, tree = jax.tree.flatten(args)
  out = [str(tree)]
  for x in leaves:
    if not isinstance(x, jax.Array):
      out.append(f"python:{type(x).__name__}:{x!r}")  # a Python scalar is baked in
      continue
    weak = getattr(x, "weak_type", False)  # typed PRNG key arrays have none
    out.append(f"{jax.typeof(x)}|weak={weak}|{x.sharding}")
  return out


def program_digest(name: str, key: Any, sources: Iterable[str | os.PathLike], args) -> str:
  """The stored program's key: ``name``, the caller's ``key`` (e.g. the config's
  :func:`~minmaxlab.runner.program_key`), :func:`source_digest` of ``sources``, package
  versions, JAX settings and ``XLA_FLAGS``, the devices and the types of ``args``."""
  devices = jax.devices()
  record = {
    "name": name,
    "key": key,
    "sources": source_digest(sources),
    "versions": _versions(),
    "flags": {f: str(getattr(jax.config, f, jax.config.values.get(f))) for f in _JAX_FLAGS},
    "xla_flags": os.environ.get("XLA_FLAGS", ""),
    "backend": jax.default_backend(),
    "devices": [devices[0].platform, devices[0].device_kind, len(devices), jax.process_count()],
    "args": _arg_types(args),
  }
  return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


class UnrecordedProgram(RuntimeError):
  """A program file whose digest is not the one recorded when this library wrote it."""


def recorded_digests(directory: Path) -> dict[str, str]:
  """The index of ``directory``: program file name -> SHA-256 (empty if missing, damaged, not
  a regular file or writable by others)."""
  try:
    index = json.loads(read_private(directory / INDEX))
  except (OSError, ValueError):
    return {}
  return index if isinstance(index, dict) else {}


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
  """An exclusive lock on ``directory``'s index (processes storing programs at once)."""
  fd = open_lock_file(directory / f"{INDEX}.lock")
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield
  finally:
    os.close(fd)


def _write_index(directory: Path, changes: Mapping[str, str | None]) -> None:
  """Apply ``changes`` (name -> digest, ``None``: drop) to the index; call under :func:`_locked`.
  Entries of files no longer there are dropped."""
  index = {**recorded_digests(directory), **changes}
  index = {k: v for k, v in index.items() if v is not None and (directory / k).exists()}
  write_private(directory / INDEX, json.dumps(index, indent=0, sort_keys=True).encode())


def read_recorded(path: Path) -> bytes:
  """The bytes of ``path`` if their SHA-256 is the one recorded in the index, else
  :class:`UnrecordedProgram` (nothing of the file is interpreted)."""
  data = read_private(path)  # a regular file of this user's, writable by no one else
  if recorded_digests(path.parent).get(path.name) != hashlib.sha256(data).hexdigest():
    raise UnrecordedProgram(f"not written by this library here (no matching digest in {INDEX})")
  return data


class _CacheHits:
  """Counts persistent-cache hits (``jax.monitoring``) per thread: an executable loaded
  from that cache cannot be serialized again on XLA:CPU (its kernels are missing when it
  is loaded back), so only freshly compiled programs are stored."""

  def __init__(self):
    self.local = threading.local()
    jax.monitoring.register_event_duration_secs_listener(self.on_duration)

  def on_duration(self, event: str, seconds: float, **kw) -> None:
    if event == "/jax/compilation_cache/cache_retrieval_time_sec":
      self.local.hits = getattr(self.local, "hits", 0) + 1

  def count(self) -> int:
    return getattr(self.local, "hits", 0)


_HITS: _CacheHits | None = None
_REFUSED: set[tuple[str, str]] = set()  # (folder, why) said once in this process


def _device_ids(compiled) -> list[int]:
  """The devices ``compiled`` runs on, in the executable's order."""
  for sharding in jax.tree.leaves(compiled.input_shardings):
    assignment = getattr(sharding, "_device_assignment", None)
    if assignment is not None:
      return [d.id for d in assignment]
    return sorted(d.id for d in sharding.device_set)
  return [jax.devices()[0].id]


class StoredProgram:
  """A jitted function whose compiled executable is kept in ``directory`` (see
  :func:`stored_program`). Calls take the jitted function's positional arguments."""

  def __init__(self, jitted, name: str, key: Any, directory, sources, stream):
    self.jitted, self.name, self.key = jitted, name, key
    self.directory = None if directory is None else Path(directory)
    self.sources, self.stream = tuple(sources), stream
    self.compiled = None  # the executable, after the first call
    self.how: str | None = None  # "loaded" | "stored" | "compiled" (not stored) | "jit"
    self.path: Path | None = None
    self.warned = False  # a line about this program's file was written

  def _say(self, text: str) -> None:
    self.warned = True
    stream = self.stream if self.stream is not None else sys.stderr
    stream.write(text + "\n")
    stream.flush()

  def _load(self, path: Path):
    from jax.experimental import serialize_executable

    data = read_recorded(path)  # before unpickling: only files this library wrote
    payload, in_tree, out_tree, device_ids = pickle.loads(data)
    by_id = {d.id: d for d in jax.devices()}
    devices = [by_id[i] for i in device_ids]
    return serialize_executable.deserialize_and_load(
      payload, in_tree, out_tree, execution_devices=devices
    )

  def _store(self, compiled, path: Path) -> None:
    from jax.experimental import serialize_executable

    payload, in_tree, out_tree = serialize_executable.serialize(compiled)
    device_ids = _device_ids(compiled)
    data = pickle.dumps((payload, in_tree, out_tree, device_ids), pickle.HIGHEST_PROTOCOL)
    make_private_folder(path.parent)
    with _locked(path.parent):
      write_private(path, data)
      olds = sorted(
        (p for p in path.parent.glob(f"{self.name}-*.exe") if p != path),
        key=lambda p: p.lstat().st_mtime,
      )
      for p in olds[: max(0, len(olds) - (KEEP_PER_NAME - 1))]:
        p.unlink(missing_ok=True)
      _write_index(path.parent, {path.name: hashlib.sha256(data).hexdigest()})

  def _folder(self) -> Path | None:
    """The folder of this program's file, ``None`` when there is none or it is untrusted."""
    if self.directory is None:  # next to JAX's persistent compilation cache, if it is on
      cache = jax.config.jax_compilation_cache_dir
      if not cache:
        return None
      self.directory = Path(cache) / "programs"
    problem = folder_problem(self.directory)
    if problem is not None:
      if (str(self.directory), problem) not in _REFUSED:  # one line per folder and process
        _REFUSED.add((str(self.directory), problem))
        self._say(
          f"warning: stored programs in {self.directory} not used: it is {problem};"
          " compiling (chmod go-w it, or another MINMAXLAB_CACHE_DIR, to use them)"
        )
      return None
    return self.directory

  def _try_load(self, path: Path, args) -> tuple | None:
    """``(outputs,)`` of the stored executable at ``path`` called on ``args``, or ``None``
    (one line said, the file deleted where it can be) when it cannot be used."""
    try:
      t0 = time.perf_counter()
      compiled = self._load(path)
      seconds = time.perf_counter() - t0
      out = jax.block_until_ready(compiled(*args))  # a failing executable fails here
    except Exception as e:  # a stale, damaged or planted file: compile instead, never crash
      self._say(
        f"stored program {path.name} unusable ({type(e).__name__}: {str(e)[:120]}); compiling it"
      )
      try:
        path.unlink(missing_ok=True)
      except OSError:  # a read-only folder: the file stays, the next run says so again
        pass
      return None
    self.compiled, self.how = compiled, "loaded"
    if seconds >= 0.5:
      self._say(f"loaded {self.name} (stored, not traced) in {seconds:.2f} s")
    return (out,)

  def _first(self, args):
    global _HITS
    directory = self._folder()
    if directory is None:
      self.compiled, self.how = self.jitted, "jit"
      return self.jitted(*args)
    digest = program_digest(self.name, self.key, self.sources, args)
    self.path = path = directory / f"{self.name}-{digest[:32]}.exe"
    if os.path.lexists(path):
      loaded = self._try_load(path, args)
      if loaded is not None:
        return loaded[0]
    traced = self.jitted.trace(*args)
    if traced.jaxpr.effects:  # e.g. an MPI collective's token, which the AOT call drops
      self.compiled, self.how = self.jitted, "jit"
      return self.jitted(*args)
    if _HITS is None:
      _HITS = _CacheHits()
    hits = _HITS.count()
    compiled = traced.lower().compile()
    self.compiled, self.how = compiled, "compiled"
    if _HITS.count() == hits:  # compiled here, not loaded from the persistent cache
      try:
        self._store(compiled, path)
        self.how = "stored"
      except Exception as e:  # e.g. a read-only folder: run without storing
        said = (str(directory), type(e).__name__)
        if not self.warned and said not in _REFUSED:  # one line per folder and fault
          _REFUSED.add(said)
          self._say(f"could not store {self.name} ({type(e).__name__}: {str(e)[:120]})")
    return compiled(*args)

  def __call__(self, *args):
    if self.compiled is None:
      return self._first(args)
    try:
      return self.compiled(*args)
    except (TypeError, ValueError):  # other argument types than the first call's: the jit retraces
      return self.jitted(*args)


def stored_program(
  jitted: Callable,
  name: str,
  key: Any,
  *,
  sources: Iterable[str | os.PathLike] = (),
  directory: str | os.PathLike | None = None,
  stream: TextIO | None = None,
) -> Callable:
  """``jitted`` (a ``jax.jit`` function) with its compiled executable stored on disk.

  The first call looks for the executable under ``directory`` (default: ``programs/`` in
  JAX's persistent compilation cache folder, :func:`enable_compilation_cache`) by
  :func:`program_digest`: the ``name``, the caller's ``key`` (what builds the program,
  e.g. the config's :func:`~minmaxlab.runner.program_key`), the contents of every ``*.py``
  file under ``sources`` (and always the ``minmaxlab`` package), the package versions, JAX's
  settings, ``XLA_FLAGS``, the devices and the arguments' shapes, dtypes and shardings.
  Found, it is loaded and called without tracing or lowering: the same executable as the
  compile, so the results are bit-identical. Missing, the function is lowered and
  compiled as usual (through the persistent cache) and, when compiled in this process,
  stored. A stale or damaged file prints one line and is compiled instead. Later calls
  with other argument types go through ``jitted``. With no ``directory`` and the
  persistent cache off (e.g. ``MINMAXLAB_CACHE_DIR=off``) every call goes to ``jitted``.

  Only for programs on one process whose executables can be serialized (``jax.experimental.
  serialize_executable``; no closed-over constants); a program with effects (an MPI
  collective's token, a host callback) runs through ``jitted`` and is never stored. JAX's
  format is a pickle, so a file is unpickled only when its SHA-256 matches the one recorded in
  the folder's ``index.json`` when this library wrote it, and only from a folder and files of
  this user's that no one else can write (created 0700 and 0600); any other folder is not used
  (one line), any other file compiled again (one line).
  """
  package = Path(__file__).resolve().parents[1]
  return StoredProgram(jitted, name, key, directory, (package, *sources), stream)
