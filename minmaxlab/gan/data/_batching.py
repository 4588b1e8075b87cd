"""Minibatches: a host-side seeded iterator and device-side samplers for ``jit``.

Both paths use the same epoch permutation: epoch ``e`` of key ``k`` is
``jax.random.permutation(jax.random.fold_in(k, e), N)`` and its batch ``i``
is the slice ``[i B, (i + 1) B)``; the last ``N mod B`` examples of the
permutation are dropped (drop-remainder). So :func:`batches` (host) and
:func:`epoch_batch` (device) produce identical batches for the same key.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Batch(NamedTuple):
  """A minibatch: ``images [B, ...]`` and ``labels [B]``."""

  images: Any
  labels: Any


def _num_examples(data: Any) -> int:
  leaves = jax.tree.leaves(data)
  if not leaves:
    raise ValueError("data has no arrays")
  n = leaves[0].shape[0]
  if any(leaf.shape[0] != n for leaf in leaves):
    raise ValueError(f"all arrays need the same leading size, got {[x.shape for x in leaves]}")
  return int(n)


def _steps_per_epoch(n: int, batch_size: int) -> int:
  if batch_size <= 0:
    raise ValueError(f"batch_size must be positive, got {batch_size}")
  if n < batch_size:
    raise ValueError(f"batch_size {batch_size} exceeds the {n} examples (drop-remainder)")
  return n // batch_size


def epoch_permutation(key: jax.Array, num_examples: int, batch_size: int, epoch) -> jax.Array:
  """Indices ``[N // B, B]`` of one epoch's batches (jit-able; ``epoch`` may be traced).

  Compute it once per epoch and ``lax.scan`` over its rows, or index with
  :func:`epoch_batch` step by step.
  """
  steps = _steps_per_epoch(num_examples, batch_size)
  perm = jax.random.permutation(jax.random.fold_in(key, epoch), num_examples)
  return perm[: steps * batch_size].reshape(steps, batch_size)


def batches(
  key: jax.Array, dataset: Any, batch_size: int, epochs: int | None = 1
) -> Iterator[Batch]:
  """Seeded, shuffled, drop-remainder minibatches on the host (numpy).

  Args:
    key: PRNG key; the same key gives the same batches.
    dataset: an :class:`ArrayDataset` (or any object with ``images`` and
      ``labels`` arrays of the same length).
    batch_size: ``B``; the last ``N mod B`` examples of each epoch's
      permutation are dropped.
    epochs: number of passes (``None``: forever), each with its own
      permutation (``fold_in(key, epoch)``).

  Yields:
    :class:`Batch` of numpy arrays.
  """
  images, labels = np.asarray(dataset.images), np.asarray(dataset.labels)
  n = _num_examples((images, labels))
  _steps_per_epoch(n, batch_size)
  epoch_iter = itertools.count() if epochs is None else range(epochs)
  for epoch in epoch_iter:
    for index in np.asarray(epoch_permutation(key, n, batch_size, epoch)):
      yield Batch(images[index], labels[index])


def sample_batch(key: jax.Array, data: Any, batch_size: int) -> Any:
  """A minibatch of ``batch_size`` examples drawn uniformly WITH replacement.

  The device fast path: keep a small data set on the device (``data`` = an
  array or a pytree of arrays with a common leading axis, e.g.
  ``(images, labels)``) and call this inside ``jit``: one ``randint`` and a
  gather per step, independent of the data-set size.
  """
  n = _num_examples(data)
  index = jax.random.randint(key, (batch_size,), 0, n)
  return jax.tree.map(lambda x: jnp.take(x, index, axis=0), data)


def epoch_batch(key: jax.Array, data: Any, batch_size: int, step) -> Any:
  """Batch ``step`` of the epoch-by-epoch shuffled stream (inside ``jit``).

  Step ``s`` is batch ``s mod (N // B)`` of epoch ``s // (N // B)``: every
  example appears once per epoch (WITHOUT replacement), identical to
  :func:`batches` with the same key. Each call recomputes the epoch
  permutation, :math:`O(N \\log N)`; for large ``N`` compute
  :func:`epoch_permutation` once per epoch instead.

  Args:
    key: PRNG key of the stream.
    data: array or pytree of arrays with a common leading axis ``N``.
    batch_size: ``B``.
    step: global step (an int or a traced int32).

  Returns:
    The batch, with the structure of ``data``.
  """
  n = _num_examples(data)
  steps = _steps_per_epoch(n, batch_size)
  step = jnp.asarray(step, jnp.int32)
  epoch, i = step // steps, step % steps
  perm = jax.random.permutation(jax.random.fold_in(key, epoch), n)
  index = jax.lax.dynamic_slice(perm, (i * batch_size,), (batch_size,))
  return jax.tree.map(lambda x: jnp.take(x, index, axis=0), data)
