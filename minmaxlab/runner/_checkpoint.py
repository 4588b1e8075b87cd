"""Atomic orbax checkpoints: write to a temporary directory, then rename."""

from __future__ import annotations

import json
import os
import re
import shutil
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
      json.dump({"step": step, **(metadata or {})}, f)
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
      return json.load(f)

  def _resolve(self, step):
    if step is None:
      step = self.latest_step()
      if step is None:
        raise FileNotFoundError(f"no checkpoint in {self.directory}")
    if not self.path(step).is_dir():
      raise FileNotFoundError(f"no checkpoint step_{step} in {self.directory}")
    return int(step)

  def restore(self, target: Any, step: int | None = None) -> tuple[Any, dict]:
    """Restore checkpoint ``step`` (default: latest) into the structure of ``target``.

    Args:
      target: a pytree with the saved structure; its leaves may be arrays or
        ``jax.ShapeDtypeStruct`` (only shapes and dtypes are used).
      step: which checkpoint; ``None`` for the latest.

    Returns:
      ``(tree, metadata)``.
    """
    import orbax.checkpoint as ocp

    step = self._resolve(step)
    with _checkpointer(ocp) as ckptr:
      tree = ckptr.restore(self.path(step) / _STATE, _abstract(target))
    # orbax returns arrays committed to a device; freshly computed ones are not, and jit
    # keys its cache on that, so a resumed run would compile its step again. Hand back
    # plain (uncommitted) arrays instead.
    tree = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)) if isinstance(x, jax.Array) else x,
                        tree)
    return tree, self.metadata(step)
