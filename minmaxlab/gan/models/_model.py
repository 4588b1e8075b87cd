"""``Model``: a network as two pure functions, and the generator/discriminator pair."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp
from flax import linen as nn
from jax.flatten_util import ravel_pytree


class Model(NamedTuple):
  """A network as two pure functions of plain pytrees.

  ``init(key) -> params`` draws parameters (a nested dict of arrays);
  ``apply(params, x) -> y`` maps a batch (leading axis) to a batch. There is
  no mutable state, so both functions compose with ``jit``, ``grad`` and
  ``vmap``; a population is ``jax.vmap(model.init)(keys)`` and is evaluated
  with ``jax.vmap(model.apply)(params, xs)`` (or ``in_axes=(0, None)`` for a
  shared input).
  """

  init: Callable[[jax.Array], Any]
  apply: Callable[[Any, jax.Array], jax.Array]


class GANPair(NamedTuple):
  """A generator, a discriminator and the generator's latent size.

  ``generator.apply(params, z[B, latent_dim]) -> x[B, *data_shape]`` and
  ``discriminator.apply(params, x[B, *data_shape]) -> logits[B]``.
  """

  generator: Model
  discriminator: Model
  latent_dim: int


Initializer = Literal["fan_in_uniform", "torch", "module"]


def from_linen(
  module: nn.Module, example_shape: Sequence[int], initializer: Initializer = "fan_in_uniform"
) -> Model:
  r"""Wrap a flax linen module as a :class:`Model`.

  ``apply(params, x)`` runs the module on a batch. ``init(key)`` returns its
  ``"params"`` collection (the module is traced on a batch of one example of
  shape ``example_shape``). Modules must keep all state in ``"params"`` (no
  batch-stats collections), which every model of this package does.

  Initialisation (``initializer``):

  * ``"fan_in_uniform"`` (default): every ``kernel`` is drawn from
    :math:`U[-a, a]`, :math:`a = \sqrt{3 / \text{fan\_in}}` (variance
    :math:`1/\text{fan\_in}`, the second moment of flax's default
    ``lecun_normal``; fan_in = the product of all kernel dimensions but the
    last), ``scale`` leaves are ones and everything else zeros. All kernels
    come from ONE uniform draw split across the leaves: XLA on CPU compiles
    each partitionable threefry draw separately, so per-leaf draws would
    multiply ``init``'s compile time (docs/benchmarks.md).
  * ``"torch"``: PyTorch's ``nn.Linear``/``nn.Conv2d`` default, how the reference
    implementations' networks start (Lipizzaner): every ``kernel`` and its layer's
    ``bias`` from :math:`U[-b, b]`, :math:`b = 1/\sqrt{\text{fan\_in}}` (kernel variance
    :math:`1/(3\,\text{fan\_in})`, a third of the default's; biases not zero), from one
    draw as above.
  * ``"module"``: the module's own initialisers (``module.init``).

  ``init`` is jit-compiled and vmaps over a batch of keys.

  Why linen: ``experiments/benchmarks/gan_models.py`` times the MNIST MLP
  pair (batch 100, Adam GDA, jitted ``lax.scan``) with linen ``apply`` and with
  ``nnx.split``/``nnx.merge`` inside the jitted step. Both lower to programs of
  identical XLA cost and ran at the same speed within the run-to-run spread
  (docs/benchmarks.md). With no speed difference, linen is kept: its parameters
  are plain nested dicts and ``apply`` has no graph to merge.
  """
  if initializer not in get_args(Initializer):
    raise ValueError(
      f"initializer must be one of {list(get_args(Initializer))}, got {initializer!r}"
    )
  example = jnp.zeros((1, *example_shape), jnp.float32)

  def module_init(key: jax.Array) -> Any:
    variables = module.init(key, example)
    extra = set(variables) - {"params"}
    if extra:
      raise ValueError(f"module {type(module).__name__} has mutable collections {extra}")
    return variables["params"]

  shapes = jax.eval_shape(module_init, jax.random.key(0))

  def uniform_init(key: jax.Array) -> Any:
    paths, treedef = jax.tree_util.tree_flatten_with_path(shapes)
    drawn = _drawn_leaves(paths, with_biases=initializer == "torch")
    total = sum(math.prod(paths[i][1].shape) for i, _ in drawn)
    draw = jax.random.uniform(key, (total,), jnp.float32, -1.0, 1.0)
    leaves = [
      (jnp.ones if _leaf_name(path) == "scale" else jnp.zeros)(s.shape, s.dtype)
      for path, s in paths
    ]
    offset = 0
    for i, fan_in in drawn:
      s = paths[i][1]
      size = math.prod(s.shape)
      chunk = draw[offset : offset + size].reshape(s.shape)
      bound = math.sqrt(3.0 / fan_in) if initializer == "fan_in_uniform" else 1 / math.sqrt(fan_in)
      leaves[i] = (bound * chunk).astype(s.dtype)
      offset += size
    return jax.tree.unflatten(treedef, leaves)

  init = jax.jit(module_init if initializer == "module" else uniform_init)

  def apply(params: Any, x: jax.Array) -> jax.Array:
    return module.apply({"params": params}, x)

  return Model(init, apply)


def flat(model: Model) -> Model:
  """``model`` with its parameters as ONE vector (the leaves raveled in tree order).

  ``init`` returns the raveled leaves, ``apply`` splits the vector back into the
  tree (``jax.flatten_util.ravel_pytree``) before calling ``model.apply``: the
  same values, the same function. What changes is the number of arrays every
  tree operation touches: optimizer moments, Lookahead's slow weights,
  selection's takes and replacement's selects act on one buffer per network
  instead of one per layer, and XLA compiles one kernel for each of those
  instead of one per leaf (the coevolution step's compile time grows with the
  number of state leaves: ``experiments/benchmarks/compile_time.py``). The price
  is a copy of the weights out of the vector on every forward pass: negligible
  for small networks, a large share of a generation for the MNIST MLP
  (``compile_time.py --layouts``; docs/benchmarks.md). The split's gradient is one concatenation
  (per-leaf slices would make it a zero-padded copy of the vector per leaf).

  All leaves must share one dtype (no silent promotion).
  """
  shapes = jax.eval_shape(model.init, jax.random.key(0))
  dtypes = {leaf.dtype for leaf in jax.tree.leaves(shapes)}
  if len(dtypes) != 1:
    raise ValueError(f"flat() needs parameters of one dtype, got {sorted(map(str, dtypes))}")
  _, unravel = ravel_pytree(jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes))

  def init(key: jax.Array) -> jax.Array:
    return ravel_pytree(model.init(key))[0]

  def apply(vector: jax.Array, x: jax.Array) -> jax.Array:
    return model.apply(unravel(vector), x)

  return Model(init, apply)


def flat_pair(pair: GANPair) -> GANPair:
  """Both networks of ``pair`` with flat parameter vectors (:func:`flat`)."""
  return GANPair(
    generator=flat(pair.generator),
    discriminator=flat(pair.discriminator),
    latent_dim=pair.latent_dim,
  )


def _drawn_leaves(paths, with_biases: bool) -> list[tuple[int, int]]:
  """``(leaf index, fan_in)`` of every leaf drawn at random, in tree order: the kernels
  (fan_in = the product of all dimensions but the last) and, ``with_biases``, each
  layer's ``bias`` with its sibling kernel's fan_in."""
  fan_ins = {
    tuple(path[:-1]): math.prod(s.shape[:-1]) for path, s in paths if _leaf_name(path) == "kernel"
  }
  drawn = []
  for i, (path, _) in enumerate(paths):
    name, layer = _leaf_name(path), tuple(path[:-1])
    if name == "kernel" or (with_biases and name == "bias" and layer in fan_ins):
      drawn.append((i, fan_ins[layer]))
  return drawn


def _leaf_name(path) -> str:
  last = path[-1]
  return str(getattr(last, "key", getattr(last, "name", last)))


def num_params(params: Any) -> int:
  """Number of scalars in a parameter pytree."""
  return sum(int(x.size) for x in jax.tree.leaves(params))
