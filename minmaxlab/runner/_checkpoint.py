"""Atomic orbax checkpoints: write to a temporary directory, then rename; verified restore."""

from __future__ import annotations

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

_STEP_DIR = re.compile(r"^step_(\d+)$")
_TMP_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"
_STATE = "state"
_META = "meta.json"
_DIGEST = "state_sha256"  # metadata key: digest of every file of the saved state


class CheckpointError(RuntimeError):
  """No checkpoint in a directory can be restored into the requested structure."""


def _digest(folder: Path) -> str:
  """SHA-256 over the relative paths and contents of every file under ``folder``."""
  h = hashlib.sha256()
  for f in sorted(p for p in folder.rglob("*") if p.is_file()):
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
  """Shape/dtype structs with a single-device sharding (orbax restores onto it)."""
  sharding = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])

  def leaf(x):
    if isinstance(x, jax.ShapeDtypeStruct) and getattr(x, "sharding", None) is not None:
      return x
    return jax.ShapeDtypeStruct(jax.numpy.shape(x), jax.numpy.result_type(x), sharding=sharding)

  return jax.tree.map(leaf, tree)


def _checkpointer(ocp):
  """An orbax checkpointer private to this process: the manager writes host
  (numpy) trees from one process, so in a multi-process JAX job it must not wait
  for the other processes at orbax's barriers."""
  me = jax.process_index()
  options = ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
  return ocp.StandardCheckpointer(multiprocessing_options=options)


class CheckpointManager:
  """Numbered checkpoints of a pytree in ``directory/step_<n>``, written atomically.

  ``save`` writes the pytree (orbax ``StandardCheckpointer``) and a JSON
  ``metadata`` dict into a fresh hidden directory ``.tmp-step_<n>-<id>``,
  waits for orbax to finish, then renames it to ``step_<n>``. A rename
  within one file system is atomic, so a process killed at any moment leaves
  either the old set of checkpoints or the new one: a half-written
  checkpoint is only ever a hidden temporary directory, which ``steps``
  ignores and the next ``save`` removes. Old checkpoints beyond
  ``max_to_keep`` are first renamed away (atomically) and then deleted.

  Restore always takes an abstract target (any pytree of arrays or
  ``jax.ShapeDtypeStruct``, e.g. from ``jax.eval_shape``), so NamedTuple
  states and dtypes come back exactly as saved.

  Verification: ``save`` records a SHA-256 of the saved state's files in the
  metadata; ``restore()`` of the latest checkpoint checks it (and that the
  metadata and the state can be read), and if the latest checkpoint is
  damaged it prints one line naming it and restores the newest intact one.
  When no checkpoint fits the target (e.g. the run's configuration changed),
  :class:`CheckpointError` says so in one line.

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
    self.max_to_keep = max_to_keep
    self.directory.mkdir(parents=True, exist_ok=True)

  def steps(self) -> list[int]:
    """Steps of the complete checkpoints, ascending."""
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
    return self.directory / f"step_{int(step)}"

  def _remove_leftovers(self) -> None:
    for p in self.directory.iterdir():
      if p.name.startswith((_TMP_PREFIX, _TRASH_PREFIX)):
        shutil.rmtree(p, ignore_errors=True)

  def save(self, step: int, tree: Any, metadata: dict | None = None) -> Path:
    """Write ``tree`` (and JSON-able ``metadata``) as checkpoint ``step``, atomically."""
    import orbax.checkpoint as ocp  # imported lazily: ~1 s

    step = int(step)
    self._remove_leftovers()
    final = self.path(step)
    tmp = self.directory / f"{_TMP_PREFIX}step_{step}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    tree = jax.device_get(tree)
    with _checkpointer(ocp) as ckptr:
      ckptr.save(tmp / _STATE, tree)
      ckptr.wait_until_finished()
    with open(tmp / _META, "w") as f:
      json.dump({"step": step, **(metadata or {}), _DIGEST: _digest(tmp / _STATE)}, f)
      f.flush()
      os.fsync(f.fileno())
    if final.exists():  # re-saving a step: move the old one away first
      final.rename(self.directory / f"{_TRASH_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}")
    tmp.rename(final)
    self._prune()
    self._remove_leftovers()
    return final

  def _prune(self) -> None:
    if self.max_to_keep is None:
      return
    for s in self.steps()[: -self.max_to_keep]:
      old = self.path(s)
      old.rename(self.directory / f"{_TRASH_PREFIX}{old.name}-{uuid.uuid4().hex[:8]}")

  def metadata(self, step: int | None = None) -> dict:
    """The JSON metadata stored with checkpoint ``step`` (default: latest)."""
    step = self._resolve(step)
    with open(self.path(step) / _META) as f:
      meta = json.load(f)
    meta.pop(_DIGEST, None)
    return meta

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
    unreadable metadata, a missing state, or files whose digest differs from the
    one recorded at save time (checkpoints saved without a digest are only
    checked for readable metadata)."""
    path = self.path(step)
    try:
      with open(path / _META) as f:
        meta = json.load(f)
    except (OSError, ValueError) as e:
      return f"unreadable {_META} ({_one_line(e)})"
    if not isinstance(meta, dict) or meta.get("step") != int(step):
      return f"{_META} does not describe step {step}"
    if not (path / _STATE).is_dir():
      return "the state is missing"
    want = meta.get(_DIGEST)
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

    with _checkpointer(ocp) as ckptr:
      tree = ckptr.restore(self.path(step) / _STATE, _abstract(target))
    # orbax returns arrays committed to a device; freshly computed ones are not, and jit
    # keys its cache on that, so a resumed run would compile its step again. Hand back
    # plain (uncommitted) arrays instead.
    tree = jax.tree.map(
      lambda x: jnp.asarray(np.asarray(x)) if isinstance(x, jax.Array) else x, tree
    )
    return tree, self.metadata(step)
