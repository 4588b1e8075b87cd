"""The generation loop's programs on one device (issue 49 item 5): a generation is one jitted
program and its read-outs another, and ``train.train`` fetches both programs' outputs in one
device-to-host transfer, dispatching the next generation first.

* :func:`make_generation`: ``Coevolution.step`` with the generation's key folded in inside the
  program (``fold_in(generation_key, g)``, the same bits as the eager ``fold_in``), run inside a
  ``while`` loop of ``n`` turns (the loop passes ``n = 1``). The trip count is an argument, so
  XLA keeps the loop instead of inlining it; XLA's CPU runtime runs the kernels of a program's
  top level on its thread pool, handing them between threads, and the body of a loop without
  that (perf: the pool's work stealing and task switches). Measured on a 2-core AMD EPYC (Zen 3),
  12 generations of ``benchmarks/host_overhead.py``'s tiny grid cost 0.47 CPU-s as plain
  programs, 0.31 inside the loop and 0.30 as one ``lax.scan`` of all 12, with the same bits.
* :func:`make_readouts`: what every row reads of the new state, at XLA's default compile
  options as before: each cell's ``net_weights_dist`` of both players and, on a 2-D mixture,
  every cell's best generator's samples on the same latents, each cell's mixture metrics and
  the mode counts of all cells' samples pooled (the sum of the cells' counts); with the
  generation's metrics, packed in one vector: one transfer (``jax.device_get`` of a tree
  converts each leaf on its own: the 23 leaves cost 0.64 ms of host time a generation there).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab import coevolution as co
from minmaxlab.gan import metrics


def make_generation(coev: co.Coevolution, compiler_options: dict | None):
  """``generation(generation_key, g, n, state, data) -> (state, metrics)``, jitted: ``n``
  generations from ``g`` (``Coevolution.step`` with ``fold_in(generation_key, g + i)``)."""
  step = coev.step

  def generation(generation_key, g, n, state, data):
    shapes = jax.eval_shape(step, generation_key, state, data)[1]
    zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)

    def body(carry):
      i, s, _ = carry
      s, m = step(jax.random.fold_in(generation_key, g + i), s, data)
      return i + 1, s, m

    _, state, m = jax.lax.while_loop(lambda c: c[0] < n, body, (jnp.int32(0), state, zeros))
    return state, m

  return jax.jit(generation, compiler_options=compiler_options)


def cell_samples(pair, n: int):
  """``(key, state) -> [rows, cols, n, ...]``: each cell's best local generator (by stored
  fitness), all on the same ``n`` latents of ``key``."""

  def samples(key, state):
    best = jax.vmap(jax.vmap(jnp.argmin))(state.fitness.min)
    pick = lambda x: jax.vmap(jax.vmap(lambda p, i: p[i]))(x, best)  # noqa: E731
    gens = jax.tree.map(pick, state.params.min)
    z = jax.random.normal(key, (n, pair.latent_dim))
    return jax.vmap(jax.vmap(pair.generator.apply, (0, None)), (0, None))(gens, z)

  return samples


def make_readouts(coev: co.Coevolution, n: int, mixture: Any = None):
  """``(readouts, layout)``. ``readouts(key, state, step_metrics) -> dict``, jitted (XLA's
  default options): ``packed``, one ``uint32`` vector holding ``step_metrics`` and the
  read-outs bit for bit (one transfer to the host), and with a 2-D ``mixture`` ``samples``
  (``n`` per cell on the latents of ``key``; fetched only for pictures). The read-outs:
  ``net_weights_dist`` ``(g, d)`` (``[rows, cols]`` each) and, with the mixture, ``cell``
  (each cell's ``metrics.mixture_metrics``) and ``pooled_counts`` (``[K]``: the high-quality
  samples of all cells per mode). ``layout(key, state, step_metrics)`` (shapes suffice) gives
  ``unpack(packed) -> (step_metrics, read-outs)``, numpy arrays."""
  sample = cell_samples(coev.pair, n)
  kind = coev.config.neighbourhood

  def reads(key, state):
    params = state.params
    out = {"net_weights_dist": (co.net_weights_dist(params.min, kind),
                                co.net_weights_dist(params.max, kind))}  # fmt: skip
    if mixture is not None:
      x = sample(key, state)
      out["samples"] = x
      out["cell"] = jax.vmap(jax.vmap(lambda s: metrics.mixture_metrics(s, mixture)))(x)
      counts = jax.vmap(jax.vmap(lambda s: metrics.mode_histogram(s, mixture)))(x)
      out["pooled_counts"] = jnp.sum(counts, axis=(0, 1))
    return out

  def readouts(key, state, step_metrics):
    out = reads(key, state)
    samples = out.pop("samples", None)
    packed = {"packed": jnp.concatenate([_words(x) for x in jax.tree.leaves((step_metrics, out))])}
    return packed if samples is None else {**packed, "samples": samples}

  def layout(key, state, step_metrics):
    def tree(k, s, m):
      out = reads(k, s)
      out.pop("samples", None)
      return m, out

    shapes = jax.eval_shape(tree, key, state, step_metrics)
    return lambda packed: _unpack(np.asarray(packed), shapes)

  return jax.jit(readouts), layout


def _words(x) -> jax.Array:
  """``x`` flat as ``uint32`` words, bit for bit (booleans 0/1; narrower types widened to
  float32 or int32, exactly; 64-bit types two words each)."""
  if x.dtype == jnp.bool_ or jnp.dtype(x.dtype).itemsize < 4:
    x = x.astype(jnp.float32 if jnp.issubdtype(x.dtype, jnp.floating) else jnp.int32)
  return jax.lax.bitcast_convert_type(x, jnp.uint32).reshape(-1)


def _unpack(packed: np.ndarray, shapes):
  """The tree of ``shapes`` from the words of :func:`_words` (numpy arrays)."""
  leaves, treedef = jax.tree.flatten(shapes)
  sizes = [int(np.prod(a.shape, dtype=np.int64)) * max(1, a.dtype.itemsize // 4) for a in leaves]
  if sum(sizes) != packed.size:
    raise ValueError(f"packed read-outs hold {packed.size} words, the layout {sum(sizes)}")
  out, i = [], 0
  for a, words in zip(leaves, sizes, strict=True):
    dtype = np.dtype(a.dtype)
    v = packed[i : i + words]
    if dtype == np.bool_:
      v = v != 0
    elif dtype.itemsize < 4:
      v = v.view(np.float32 if jnp.issubdtype(dtype, jnp.floating) else np.int32).astype(dtype)
    else:
      v = v.view(dtype)
    out.append(v.reshape(a.shape))
    i += words
  return jax.tree.unflatten(treedef, out)
