"""The folder of JAX's persistent compilation cache (and of the stored programs in it).

A compiled program is machine code that a later process runs, so the folder is trusted as
ssh trusts its keys: created 0700, and used only when it is a folder of this user's that no
one else can write and that holds nothing but files and folders (a FIFO named like an entry
would hang the read). Anything else, or a folder that cannot be made or written (a
read-only ``$HOME``), turns the cache off with one line: the run compiles, never crashes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import jax

from minmaxlab.runner._private_files import folder_problem, make_private_folder

MIN_COMPILE_TIME_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"
MIN_COMPILE_TIME_S = 0.1  # programs that compile faster are not stored (unless the above says)

CACHE_ENV = "MINMAXLAB_CACHE_DIR"  # the compilation cache folder ("off": none)


def default_cache_root() -> Path:
  """``$MINMAXLAB_CACHE`` or ``~/.cache/minmaxlab`` (shared with the classifier cache)."""
  root = os.environ.get("MINMAXLAB_CACHE")
  return Path(root) if root else Path.home() / ".cache" / "minmaxlab"


def compilation_cache_dir() -> Path | None:
  """Where compiled programs are cached: ``$MINMAXLAB_CACHE_DIR`` if set (``off``/``0``/empty:
  no cache), else ``<default_cache_root()>/jax``."""
  value = os.environ.get(CACHE_ENV)
  if value is None:
    return default_cache_root() / "jax"
  if value.strip().lower() in ("", "0", "off", "none", "false"):
    return None
  return Path(value).expanduser()


def cache_problem(path: Path) -> str | None:
  """Why ``path`` cannot hold the compilation cache (``None``: it can); creates it (0700)."""
  try:
    make_private_folder(path)
  except OSError as e:
    where = f": {e.filename}" if e.filename else ""
    return f"cannot be created ({type(e).__name__}: {e.strerror or e}{where})"
  problem = folder_problem(path)
  if problem is not None:
    return f"is {problem}"
  if not os.access(path, os.W_OK | os.X_OK):
    return "is not writable"
  try:
    with os.scandir(path) as entries:
      for entry in entries:
        if not (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)):
          return f"holds {entry.name!r}, not a regular file or folder"
  except OSError as e:
    return f"cannot be listed ({type(e).__name__}: {e.strerror or e})"
  return None


def enable_compilation_cache(directory: str | os.PathLike | None = None) -> Path | None:
  """Turn on JAX's persistent compilation cache in ``directory`` (default
  :func:`compilation_cache_dir`); returns the folder, or ``None`` when disabled.

  Every program that takes more than ``MIN_COMPILE_TIME_S`` (0.1 s) to compile (or JAX's own
  ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``, when set) is stored, keyed by its HLO,
  the JAX/XLA versions and the device, so any later process (a rerun, a resumed run, a
  run with another seed or length) loads it in milliseconds. Call it before the first
  compilation. A missing folder is created 0700; a folder that cannot be created or
  written, is another user's or writable by group or others, or holds something other
  than files and folders is not used (one line on stderr; ``None``): the run compiles.
  """
  path = Path(directory).expanduser() if directory is not None else compilation_cache_dir()
  if path is None:
    return None
  problem = cache_problem(path)
  if problem is not None:
    print(
      f"warning: compilation cache {path} not used: it {problem}; compiling everything"
      f" (fix it, or set {CACHE_ENV} to another folder or to off)",
      file=sys.stderr,
      flush=True,
    )
    return None
  jax.config.update("jax_compilation_cache_dir", os.fspath(path))
  if MIN_COMPILE_TIME_ENV not in os.environ:  # the user's own setting, read by JAX, wins
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME_S)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path
