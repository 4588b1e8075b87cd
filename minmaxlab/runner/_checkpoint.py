"""Numbered checkpoints through orbax's own ``CheckpointManager``, with a SHA-256 check."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.runner._finish import fault_point

_STEP_PREFIX = "step"  # orbax names the step folders step_<n>
_STEP_DIR = re.compile(r"^step_(\d+)$")
_ORBAX_TMP = (
  ".orbax-checkpoint-tmp"  # orbax's unfinished folders: step_<n>.orbax-checkpoint-tmp-<t>
)
_TMP_PREFIX = ".tmp-"  # ours: unfinished digest files, and folders of the pre-orbax-manager layout
_TRASH_PREFIX = ".trash-"
_STATE = "state"  # orbax item: the pytree (StandardSave)
_META = "meta"  # orbax item: the JSON metadata (JsonSave)
_DIGEST = "sha256.json"  # ours, written once orbax has committed the step
_LEGACY_META = "meta.json"  # checkpoints written before orbax's manager: digest inside
_LEGACY_DIGEST = "state_sha256"


class CheckpointError(RuntimeError):
  """No checkpoint in a directory can be restored into the requested structure."""


def _digest(folder: Path, items=None) -> str:
  """SHA-256 over the relative paths and contents of every file under ``folder``
  (only under its subfolders ``items`` when given)."""
  roots = [folder / i for i in items] if items else [folder]
  h = hashlib.sha256()
  files = sorted(p for r in roots if r.is_dir() for p in r.rglob("*") if p.is_file())
  for f in files:
    h.update(str(f.relative_to(folder)).encode() + b"\0")
    with open(f, "rb") as fh:
      for block in iter(lambda: fh.read(1 << 20), b""):
        h.update(block)
    h.update(b"\0")
  return h.hexdigest()


def _one_line(e: BaseException) -> str:
  lines = str(e).strip().splitlines()
  return f"{type(e).__name__}: {lines[0][:200]}" if lines else type(e).__name__


def _abstract(tree: Any) -> Any:
  """The restore target orbax is given: shape/dtype structs on one device, except for
  leaves whose dtype a JAX array cannot hold here (64-bit ones with ``jax_enable_x64``
  off), which are restored as NumPy arrays of exactly that dtype."""
  sharding = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])

  def leaf(x):
    dtype = x.dtype if hasattr(x, "dtype") else jnp.result_type(x)
    shape = tuple(x.shape) if hasattr(x, "shape") else tuple(np.shape(x))
    extended = jax.dtypes.issubdtype(dtype, jax.dtypes.extended)
    if not extended and jax.dtypes.canonicalize_dtype(dtype) != dtype:
      return np.empty(shape, dtype)  # orbax restores NumPy targets as NumPy, dtype kept
    if isinstance(x, jax.ShapeDtypeStruct) and getattr(x, "sharding", None) is not None:
      return x
    return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)

  return jax.tree.map(leaf, tree)


def _orbax_manager(directory: Path, max_to_keep: int | None):
  """orbax's ``CheckpointManager`` over ``directory``, private to this process: a
  run writes host (NumPy) trees from one process, so in a multi-process JAX job it
  must not wait for the other processes at orbax's barriers. Saves are synchronous
  (the state is on the host already and the caller wants it on disk)."""
  import orbax.checkpoint as ocp  # imported lazily: ~1 s

  me = jax.process_index()
  options = ocp.CheckpointManagerOptions(
    max_to_keep=max_to_keep,
    step_prefix=_STEP_PREFIX,
    create=False,  # orbax refuses create=True with active_processes; __init__ creates it
    cleanup_tmp_directories=False,  # the writer cleans up in save(): a reader must not
    enable_async_checkpointing=False,
    multiprocessing_options=ocp.options.MultiprocessingOptions(
      primary_host=me, active_processes={me}
    ),
  )
  return ocp.CheckpointManager(directory, options=options, item_names=(_STATE, _META))


def _disk_full(e: BaseException) -> bool:
  """Whether ``e`` or an error it wraps (orbax wraps the file system's) is a full disk or
  quota (``ENOSPC``, ``EDQUOT``)."""
  seen, todo = set(), [e]
  while todo:
    x = todo.pop()
    if x is None or id(x) in seen:
      continue
    seen.add(id(x))
    if isinstance(x, OSError) and x.errno in (errno.ENOSPC, errno.EDQUOT):
      return True
    if "No space left on device" in str(x) or "Disk quota exceeded" in str(x):
      return True
    todo += [x.__cause__, x.__context__, *getattr(x, "exceptions", ())]
  return False


def _fsync_write(path: Path, text: str) -> None:
  """Write ``text`` to ``path`` atomically (temporary file, fsync, rename)."""
  tmp = path.with_name(f"{_TMP_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}")
  with open(tmp, "w") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())
  tmp.rename(path)


class CheckpointManager:
  """Numbered checkpoints of a pytree in ``directory/step_<n>``, kept by orbax's
  own ``orbax.checkpoint.CheckpointManager`` and verified with SHA-256.

  ``save`` hands the pytree (orbax ``StandardSave``) and a JSON ``metadata``
  dict (``JsonSave``) to orbax's manager, which writes them into a temporary
  folder and renames it to ``step_<n>`` when complete (atomic within one file
  system: a process killed at any moment leaves either the old set of
  checkpoints or the new one plus an unfinished temporary folder, which
  ``steps`` ignores and the next ``save`` removes). orbax also deletes the
  checkpoints beyond ``max_to_keep``. A save at step ``n`` supersedes every
  checkpoint at ``n`` or later (they belong to a continuation that was given
  up, e.g. after a damaged checkpoint), so the kept ones are always the newest
  steps.

  orbax does not checksum the data it writes (its zarr3 arrays have a CRC-32C
  on the shard index only), so this class adds one: once orbax has committed a
  step, a SHA-256 of its ``state`` and ``meta`` files goes to
  ``step_<n>/sha256.json``. ``restore()`` checks it (a step without it was cut
  off before it was verified and counts as damaged), and if the latest
  checkpoint is damaged it prints one line naming it and restores the newest
  intact one. When no checkpoint fits the target (e.g. the run's configuration
  changed), :class:`CheckpointError` says so in one line.

  Restore always takes an abstract target (any pytree of arrays or
  ``jax.ShapeDtypeStruct``, e.g. from ``jax.eval_shape``), so NamedTuple
  states and dtypes come back exactly as saved; a 64-bit leaf (NumPy array or
  struct) comes back as a NumPy array of that dtype even with ``jax_enable_x64``
  off, every other leaf as an uncommitted JAX array.

  Example:
    >>> ckpt = CheckpointManager("runs/x/checkpoints", max_to_keep=3)
    >>> ckpt.save(100, state, metadata={"seed": 0})
    >>> state, meta = ckpt.restore(jax.eval_shape(lambda: state))

  Args:
    directory: where the checkpoints live (created; made absolute).
    max_to_keep: how many of the newest checkpoints to keep (``None``: all).
  """

  def __init__(self, directory: str | os.PathLike, max_to_keep: int | None = 3):
    if max_to_keep is not None and int(max_to_keep) < 1:
      raise ValueError(f"max_to_keep must be >= 1 or None, got {max_to_keep!r}")
    self.directory = Path(directory).expanduser().resolve()
    self.max_to_keep = None if max_to_keep is None else int(max_to_keep)
    self.directory.mkdir(parents=True, exist_ok=True)

  def steps(self) -> list[int]:
    """Steps of the complete checkpoints, ascending (read from disk on each call)."""
    out = []
    for p in self.directory.iterdir():
      m = _STEP_DIR.match(p.name)
      if m and p.is_dir():
        out.append(int(m.group(1)))
    return sorted(out)

  def latest_step(self) -> int | None:
    """The newest complete checkpoint's step, or ``None``."""
    steps = self.steps()
    return steps[-1] if steps else None

  def path(self, step: int) -> Path:
    return self.directory / f"{_STEP_PREFIX}_{int(step)}"

  def _remove_leftovers(self) -> None:
    """Unfinished saves (orbax's temporary folders, our temporary files) and folders
    renamed away for deletion."""
    for p in self.directory.iterdir():
      if p.name.startswith((_TMP_PREFIX, _TRASH_PREFIX)) or _ORBAX_TMP in p.name:
        if p.is_dir():
          shutil.rmtree(p, ignore_errors=True)
        else:
          p.unlink(missing_ok=True)

  def _discard(self, step: int) -> None:
    """Remove checkpoint ``step``: renamed away first (atomic), then deleted."""
    old = self.path(step)
    trash = self.directory / f"{_TRASH_PREFIX}{old.name}-{uuid.uuid4().hex[:8]}"
    old.rename(trash)
    shutil.rmtree(trash, ignore_errors=True)

  def save(self, step: int, tree: Any, metadata: dict | None = None) -> Path:
    """Write ``tree`` (and JSON-able ``metadata``) as checkpoint ``step``, atomically. A full
    disk (or quota) is one ``OSError`` (``ENOSPC``) naming the checkpoint, its unfinished
    folder removed (orbax's own error is a long chain of wrapped ones)."""
    step = int(step)
    self._remove_leftovers()
    for s in self.steps():  # superseded: a continuation that was given up
      if s >= step:
        self._discard(s)
    tree = jax.device_get(tree)
    meta = {"step": step, **(metadata or {})}
    try:
      return self._save(step, tree, meta)
    except Exception as e:
      if not _disk_full(e):
        raise
      self._remove_leftovers()  # the unfinished folder; the earlier checkpoints are intact
      raise OSError(
        errno.ENOSPC,
        f"no space left on the device for checkpoint {step} in {self.directory} (the earlier"
        " checkpoints are intact); free some space and run the same command again",
        str(self.directory),
      ) from None

  def _save(self, step: int, tree: Any, meta: dict) -> Path:
    import orbax.checkpoint as ocp

    with _orbax_manager(self.directory, self.max_to_keep) as mngr:
      saved = mngr.save(
        step,
        args=ocp.args.Composite(
          **{_STATE: ocp.args.StandardSave(tree), _META: ocp.args.JsonSave(meta)}
        ),
        force=True,
      )
      mngr.wait_until_finished()
    final = self.path(step)
    if not saved or not final.is_dir():
      raise RuntimeError(f"orbax did not write checkpoint {final}")
    fault_point("checkpoint:digest")  # tests: killed between orbax's commit and the digest
    _fsync_write(final / _DIGEST, json.dumps({"sha256": _digest(final, (_STATE, _META))}))
    return final

  def metadata(self, step: int | None = None) -> dict:
    """The JSON metadata stored with checkpoint ``step`` (default: latest)."""
    step = self._resolve(step)
    return self._read_meta(self.path(step))

  @staticmethod
  def _read_meta(path: Path) -> dict:
    if (path / _LEGACY_META).exists():
      with open(path / _LEGACY_META) as f:
        meta = json.load(f)
      meta.pop(_LEGACY_DIGEST, None)
      return meta
    with open(path / _META / "metadata") as f:  # orbax JsonSave's file
      return json.load(f)

  def _resolve(self, step):
    if step is None:
      step = self.latest_step()
      if step is None:
        raise FileNotFoundError(f"no checkpoint in {self.directory}")
    if not self.path(step).is_dir():
      raise FileNotFoundError(f"no checkpoint step_{step} in {self.directory}")
    return int(step)

  def verify(self, step: int) -> str | None:
    """``None`` if checkpoint ``step`` is intact, else what is wrong (one line):
    unreadable metadata, a missing state, no recorded digest, or files whose digest
    differs from the one recorded at save time."""
    path = self.path(step)
    if (path / _LEGACY_META).exists():
      return self._verify_legacy(path, step)
    try:
      meta = self._read_meta(path)
    except (OSError, ValueError) as e:
      return f"unreadable metadata ({_one_line(e)})"
    if not isinstance(meta, dict) or meta.get("step") != int(step):
      return f"its metadata does not describe step {step}"
    if not (path / _STATE).is_dir():
      return "the state is missing"
    try:
      want = json.loads((path / _DIGEST).read_text())["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as e:
      return f"no readable {_DIGEST}: the save was cut off ({_one_line(e)})"
    if _digest(path, (_STATE, _META)) != want:
      return "its files differ from those written (checksum mismatch)"
    return None

  @staticmethod
  def _verify_legacy(path: Path, step: int) -> str | None:
    """Checkpoints of the earlier layout (``meta.json`` holding the digest of ``state``)."""
    try:
      with open(path / _LEGACY_META) as f:
        meta = json.load(f)
    except (OSError, ValueError) as e:
      return f"unreadable {_LEGACY_META} ({_one_line(e)})"
    if not isinstance(meta, dict) or meta.get("step") != int(step):
      return f"{_LEGACY_META} does not describe step {step}"
    if not (path / _STATE).is_dir():
      return "the state is missing"
    want = meta.get(_LEGACY_DIGEST)
    if want is not None and _digest(path / _STATE) != want:
      return "its files differ from those written (checksum mismatch)"
    return None

  def restore(self, target: Any, step: int | None = None, *, log=None) -> tuple[Any, dict]:
    """Restore checkpoint ``step`` (default: the newest intact one) into ``target``'s structure.

    With ``step=None`` the checkpoints are tried newest first: a damaged one
    (see :meth:`verify`, or one orbax cannot read) is reported in one line
    (``log``, default stderr) and the next older one is used.

    Args:
      target: a pytree with the saved structure; its leaves may be arrays or
        ``jax.ShapeDtypeStruct`` (only shapes and dtypes are used).
      step: which checkpoint; ``None`` for the newest intact one.
      log: ``log(line)`` for the damaged-checkpoint notes.

    Returns:
      ``(tree, metadata)``.

    Raises:
      FileNotFoundError: no checkpoint at all (or no ``step``).
      CheckpointError: every candidate is damaged or does not fit ``target``
        (one line; the last reason is given).
    """
    say = log or (lambda text: print(text, file=sys.stderr, flush=True))
    if step is not None:
      step = self._resolve(step)
      problem = self.verify(step)
      if problem is not None:
        raise CheckpointError(f"checkpoint {self.path(step)} is damaged: {problem}")
      try:
        return self._restore(target, step)
      except Exception as e:
        raise CheckpointError(f"cannot restore {self.path(step)}: {_one_line(e)}") from e
    steps = self.steps()
    if not steps:
      raise FileNotFoundError(f"no checkpoint in {self.directory}")
    reasons = []
    for s in reversed(steps):
      problem = self.verify(s)
      if problem is None:
        try:
          return self._restore(target, s)
        except Exception as e:  # orbax/tensorstore raise many types
          problem = f"intact, but does not fit the requested state ({_one_line(e)})"
      else:
        problem = f"damaged: {problem}"
      reasons.append((s, problem))
      older = [x for x in steps if x < s]
      nxt = f"trying step_{older[-1]}" if older else "no older checkpoint"
      say(f"checkpoint {self.path(s)} {problem}; {nxt}")
    s, problem = reasons[-1]
    raise CheckpointError(
      f"no checkpoint in {self.directory} can be restored (step_{s}: {problem}); if the run's"
      " configuration changed, use a fresh workdir"
    )

  def _restore(self, target: Any, step: int) -> tuple[Any, dict]:
    import orbax.checkpoint as ocp

    args = {_STATE: ocp.args.StandardRestore(_abstract(target))}
    with _orbax_manager(self.directory, None) as mngr:
      tree = mngr.restore(step, args=ocp.args.Composite(**args))[_STATE]
    # orbax returns arrays committed to a device; freshly computed ones are not, and jit
    # keys its cache on that, so a resumed run would compile its step again. Hand back
    # plain (uncommitted) arrays instead.
    tree = jax.tree.map(
      lambda x: jnp.asarray(np.asarray(x)) if isinstance(x, jax.Array) else x, tree
    )
    return tree, self.metadata(step)
