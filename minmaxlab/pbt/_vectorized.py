r"""Vectorized population based training: members are a leading array axis.

One jit-compiled round trains every member ``steps`` steps (``vmap`` over
members of a ``lax.scan`` over steps), evaluates them, and lets the ready
members exploit (copy parameters AND optimizer states of both players, slow
lookahead weights included, from a better member) and explore (mutate the
copied hyperparameters). Hyperparameters are arrays written into the
``optax.inject_hyperparams`` states, so nothing recompiles across rounds.

References:
  Jaderberg et al., "Population Based Training of Neural Networks", 2017,
  https://arxiv.org/abs/1711.09846
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.pbt._space import Space, explore, sample_prior, validate_space
from minmaxlab.transforms import set_hyperparams


def truncation_size(population_size: int, fraction: float) -> int:
  """``ceil(P * fraction)`` capped at ``floor(P / 2)``: how many members form
  the top and the bottom groups of truncation selection."""
  if not 0.0 < fraction <= 0.5:
    raise ValueError(f"truncation fraction must be in (0, 0.5], got {fraction!r}")
  n = min(math.ceil(population_size * fraction), population_size // 2)
  if n < 1:
    raise ValueError(f"truncation needs a population of at least 2, got {population_size}")
  return n


def _finite(fitness):
  return jnp.where(jnp.isfinite(fitness), fitness, -jnp.inf)


def truncation_exploit(
  key: jax.Array, fitness: jax.Array, ready: jax.Array, fraction: float = 0.25
) -> tuple[jax.Array, jax.Array]:
  r"""Truncation selection: every ready member of the bottom ``fraction``
  copies a uniformly drawn member of the top ``fraction``.

  With :math:`n = \min(\lceil P q \rceil, \lfloor P/2 \rfloor)`, members are
  ranked by fitness (higher is better; NaN counts as :math:`-\infty`, ties by
  index) and bottom member :math:`i` gets source :math:`s_i \sim
  \mathcal{U}(\text{top}_n)`.

  Args:
    key: PRNG key.
    fitness: ``(P,)``, higher is better.
    ready: boolean ``(P,)``; members that are not ready keep themselves.
    fraction: ``q`` in ``(0, 0.5]``.

  Returns:
    ``(source, copied)``: ``(P,)`` int32 indices to gather from (``i`` itself
    when not copied) and the boolean mask of members that copied.
  """
  P = fitness.shape[0]
  n = truncation_size(P, fraction)
  order = jnp.argsort(-_finite(fitness), stable=True)
  rank = jnp.zeros((P,), jnp.int32).at[order].set(jnp.arange(P, dtype=jnp.int32))
  copied = (rank >= P - n) & ready
  pick = order[jax.random.randint(key, (P,), 0, n)]
  idx = jnp.arange(P, dtype=jnp.int32)
  return jnp.where(copied, pick, idx).astype(jnp.int32), copied


def tournament_exploit(
  key: jax.Array, fitness: jax.Array, ready: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """Binary tournament: each ready member meets one uniformly drawn other
  member and copies it if the opponent's fitness is strictly higher.

  Returns ``(source, copied)`` as :func:`truncation_exploit`.
  """
  P = fitness.shape[0]
  if P < 2:
    raise ValueError(f"a tournament needs a population of at least 2, got {P}")
  idx = jnp.arange(P, dtype=jnp.int32)
  opponent = (idx + jax.random.randint(key, (P,), 1, P)) % P
  f = _finite(fitness)
  copied = ready & (f[opponent] > f)
  return jnp.where(copied, opponent, idx).astype(jnp.int32), copied


def gather_members(tree: Any, source: jax.Array) -> Any:
  """Row ``source[i]`` of every leaf (leading member axis) becomes row ``i``."""
  return jax.tree.map(lambda x: jnp.take(x, source, axis=0), tree)


class PBTState(NamedTuple):
  """Population state; every field but ``step`` has a leading member axis ``P``.

  Attributes:
    params: members' parameters (e.g. ``Players``).
    opt_state: members' game-transform states.
    hparams: dict name -> ``(P,)`` array.
    fitness: ``(P,)`` fitness at the last evaluation (higher is better).
    steps_since_exploit: ``(P,)`` int32 training steps since the member last copied.
    parent: ``(P,)`` int32 slot each member copied from at the last round
      (itself when it did not copy).
    step: int32 scalar, training steps taken by every member so far.
  """

  params: Any
  opt_state: Any
  hparams: dict
  fitness: jax.Array
  steps_since_exploit: jax.Array
  parent: jax.Array
  step: jax.Array


class VectorizedPBT(NamedTuple):
  r"""``init(key, population_size) -> PBTState`` and the jitted
  ``step(key, state, *args) -> (state, metrics)`` of one PBT round (see
  :func:`vectorized_pbt`).

  One round (:math:`t` = steps taken so far, :math:`S` = ``steps``):

  1. write every member's hyperparameters into its optimizer state
     (``targets``) and train it :math:`S` steps with ``train_step``;
  2. ``fitness = evaluate(key, params, opt_state, hparams)`` (any
     non-differentiable score, higher is better; NaN ranks last);
  3. members with at least ``ready`` steps since their last copy, once
     :math:`t + S \ge` ``burn_in``, exploit: truncation (the bottom fraction
     copies a random top member) or binary tournament; parameters, optimizer
     states (both players; lookahead slow weights) and hyperparameters are
     gathered together;
  4. the members that copied explore (perturb x0.8/x1.2 or resample from the
     prior, clipped to the bounds).

  Everything is keyed by the one ``key`` given to ``step``; with the same keys
  two runs are identical. Hyperparameters are arrays, so rounds never retrace.
  """

  init: Callable[..., PBTState]
  step: Callable[..., tuple[PBTState, dict]]


# the black-box controller's exploits (``pbt.ControllerConfig.exploit``) but "none"
VectorizedExploit = Literal["tournament", "truncation"]


def vectorized_pbt(
  init_member: Callable,
  train_step: Callable,
  evaluate: Callable,
  space: Space,
  *,
  steps: int,
  targets: Mapping[str, tuple[str, str]] | None = None,
  exploit: VectorizedExploit = "tournament",
  truncation_fraction: float = 0.25,
  resample_probability: float = 0.25,
  perturb_factors: tuple[float, ...] = (0.8, 1.2),
  ready: int = 0,
  burn_in: int = 0,
  jit: bool = True,
  devices: Any = None,
) -> VectorizedPBT:
  """Population based training of a vmapped population, one jitted round per call (what a
  round does: :class:`VectorizedPBT`).

  Example:
    >>> tx = minmaxlab.lookahead_minmax(minmaxlab.per_player(
    ...     min=optax.inject_hyperparams(optax.adam)(1e-3),
    ...     max=optax.inject_hyperparams(optax.adam)(1e-3)))
    >>> pbt = vectorized_pbt(init_member, train_step, evaluate,
    ...     {"lr_g": Continuous(low=1e-4, high=1e-1), "lr_d": Continuous(low=1e-4, high=1e-1)},
    ...     targets={"lr_g": ("min", "learning_rate"), "lr_d": ("max", "learning_rate")},
    ...     steps=50)
    >>> state = pbt.init(jax.random.key(0), 16)
    >>> state, metrics = pbt.step(jax.random.key(1), state)

  Args:
    init_member: ``(key, hparams) -> (params, opt_state)`` for one member.
    train_step: ``(key, params, opt_state, hparams, *args) -> (params,
      opt_state, metrics)``: one training step of one member (pure).
    evaluate: ``(key, params, opt_state, hparams, *args) -> fitness`` scalar.
    space: name -> :class:`Continuous` / :class:`Categorical`.
    steps: training steps per round (``S``).
    targets: hyperparameter name -> ``(player, injected leaf name)`` written
      into the optimizer state before training (others, e.g. loss weights, are
      only passed to ``train_step``).
    exploit: ``"tournament"`` (default, as :class:`~minmaxlab.pbt.ControllerConfig`'s) or
      ``"truncation"``.
    truncation_fraction: top/bottom fraction for truncation (default 0.25).
    resample_probability: explore resamples with this probability (0.25).
    perturb_factors: multiplicative perturbations (0.8, 1.2).
    ready: minimum steps since a member's last copy before it may copy again.
    burn_in: no exploitation before this many steps.
    jit: compile ``step`` with ``jax.jit``.
    devices: shard the member axis across these devices (a sequence, or
      ``"local"`` for ``jax.local_devices()``): ``init`` places every member
      field with a ``NamedSharding`` over a one-axis ``("members",)`` mesh and
      ``step`` keeps it there (training and evaluation run on the member's
      device; exploit gathers across devices). The population size must be a
      multiple of the device count. Same numbers as on one device (float
      rounding aside). ``None``: no sharding.

  Returns:
    A :class:`VectorizedPBT`.
  """
  targets = dict(targets or {})
  _check_settings(space, targets, steps, exploit, truncation_fraction, ready, burn_in)
  settings = _Settings(
    init_member=init_member, train_step=train_step, evaluate=evaluate, space=space,
    steps=int(steps), targets=targets, exploit=exploit, truncation_fraction=truncation_fraction,
    resample_probability=resample_probability, perturb_factors=perturb_factors, ready=ready,
    burn_in=burn_in,
  )  # fmt: skip
  shardings = member_shardings(devices) if devices is not None else None
  step = _compiled(functools.partial(_round, settings), jit, shardings)
  return VectorizedPBT(init=functools.partial(_init_population, settings, shardings), step=step)


def _compiled(pbt_step, jit, shardings):
  if not jit:
    return pbt_step
  if shardings is None:
    return jax.jit(pbt_step)
  return jax.jit(pbt_step, out_shardings=(_state_shardings(shardings), None))


class _Settings(NamedTuple):
  """The arguments of :func:`vectorized_pbt` that a round reads."""

  init_member: Callable
  train_step: Callable
  evaluate: Callable
  space: Space
  steps: int
  targets: dict
  exploit: VectorizedExploit
  truncation_fraction: float
  resample_probability: float
  perturb_factors: tuple[float, ...]
  ready: int
  burn_in: int


def _check_settings(space, targets, steps, exploit, truncation_fraction, ready, burn_in):
  validate_space(space)
  for hp in targets:
    if hp not in space:
      raise ValueError(f"target {hp!r} is not a dimension of the space {sorted(space)}")
  if int(steps) < 1:
    raise ValueError(f"steps must be >= 1, got {steps!r}")
  if exploit not in get_args(VectorizedExploit):
    raise ValueError(f"exploit must be one of {get_args(VectorizedExploit)}, got {exploit!r}")
  if exploit == "truncation":
    truncation_size(2, truncation_fraction)  # validates the fraction
  if int(ready) < 0 or int(burn_in) < 0:
    raise ValueError(f"ready and burn_in must be >= 0, got {ready!r}, {burn_in!r}")


def _inject(settings: _Settings, opt_state, hparams):
  """Every member's hyperparameters written into its optimizer state (``targets``)."""
  if not settings.targets:
    return opt_state
  return jax.vmap(lambda o, h: set_hyperparams(o, settings.targets, h))(opt_state, hparams)


def _init_population(settings: _Settings, shardings, key, population_size: int) -> PBTState:
  P = int(population_size)
  if P < 2:
    raise ValueError(f"population_size must be >= 2, got {population_size!r}")
  k_h, k_m = jax.random.split(key)
  hparams = sample_prior(k_h, settings.space, (P,))
  params, opt_state = jax.vmap(settings.init_member)(jax.random.split(k_m, P), hparams)
  state = PBTState(
    params=params,
    opt_state=_inject(settings, opt_state, hparams),
    hparams=hparams,
    fitness=jnp.full((P,), -jnp.inf, jnp.float32),
    steps_since_exploit=jnp.zeros((P,), jnp.int32),
    parent=jnp.arange(P, dtype=jnp.int32),
    step=jnp.zeros((), jnp.int32),
  )
  if shardings is None:
    return state
  n = shardings[0].mesh.size
  if P % n:
    raise ValueError(f"population_size {P} is not a multiple of the {n} devices it is sharded on")
  return jax.device_put(state, _state_shardings(shardings))


def _train_member(settings: _Settings, key, params, opt_state, hparams, *args):
  """``steps`` training steps of one member; the last step's metrics."""

  def body(carry, k):
    p, o = carry
    p, o, m = settings.train_step(k, p, o, hparams, *args)
    return (p, o), m

  (params, opt_state), metrics = jax.lax.scan(
    body, (params, opt_state), jax.random.split(key, settings.steps)
  )
  return params, opt_state, jax.tree.map(lambda x: x[-1], metrics)


def _round(settings: _Settings, key, state: PBTState, *args):
  """One PBT round (see :class:`VectorizedPBT`): ``(new state, metrics)``."""
  P = state.fitness.shape[0]
  k_train, k_eval, k_exploit, k_explore = jax.random.split(key, 4)
  opt_state = _inject(settings, state.opt_state, state.hparams)
  in_axes = (0, 0, 0, 0) + (None,) * len(args)
  train = lambda *a: _train_member(settings, *a)  # noqa: E731
  params, opt_state, train_metrics = jax.vmap(train, in_axes)(
    jax.random.split(k_train, P), state.params, opt_state, state.hparams, *args
  )
  fitness = jax.vmap(settings.evaluate, in_axes)(
    jax.random.split(k_eval, P), params, opt_state, state.hparams, *args
  )
  fitness = jnp.asarray(fitness, jnp.float32).reshape((P,))
  step = state.step + settings.steps
  since = state.steps_since_exploit + settings.steps
  is_ready = (since >= settings.ready) & (step >= settings.burn_in)
  if settings.exploit == "truncation":
    source, copied = truncation_exploit(k_exploit, fitness, is_ready, settings.truncation_fraction)
  else:
    source, copied = tournament_exploit(k_exploit, fitness, is_ready)
  params, opt_state, hparams, new_fitness = gather_members(
    (params, opt_state, state.hparams, fitness), source
  )
  hparams = explore(
    k_explore, hparams, copied, settings.space, settings.resample_probability,
    settings.perturb_factors,
  )  # fmt: skip
  new_state = PBTState(
    params=params,
    opt_state=_inject(settings, opt_state, hparams),
    hparams=hparams,
    fitness=new_fitness,
    steps_since_exploit=jnp.where(copied, 0, since).astype(jnp.int32),
    parent=source,
    step=step,
  )
  metrics = _round_metrics(fitness, copied, source, hparams)
  return new_state, {**metrics, "train": train_metrics}


def _round_metrics(fitness, copied, source, hparams) -> dict:
  finite = jnp.where(jnp.isfinite(fitness), fitness, -jnp.inf)
  return {
    "fitness": fitness,
    "best_fitness": jnp.max(finite),
    "best_member": jnp.argmax(finite).astype(jnp.int32),
    "mean_fitness": jnp.mean(fitness),
    "num_copied": jnp.sum(copied).astype(jnp.int32),
    "copied": copied,
    "source": source,
    "hparams": hparams,
  }


def member_shardings(devices: Any) -> tuple[Any, Any]:
  """``(members, replicated)``: the ``NamedSharding`` that splits a leading member
  axis over a one-axis ``("members",)`` mesh of ``devices`` (a sequence or
  ``"local"``), and the one that replicates over it."""
  from jax.sharding import Mesh, NamedSharding, PartitionSpec

  if isinstance(devices, str):
    if devices != "local":
      raise ValueError(f"devices must be a sequence of devices or 'local', got {devices!r}")
    devices = jax.local_devices()
  devices = list(devices)
  if not devices:
    raise ValueError("devices must name at least one device")
  mesh = Mesh(np.asarray(devices), ("members",))
  return NamedSharding(mesh, PartitionSpec("members")), NamedSharding(mesh, PartitionSpec())


def _state_shardings(shardings) -> PBTState:
  members, replicated = shardings
  return PBTState(
    params=members,
    opt_state=members,
    hparams=members,
    fitness=members,
    steps_since_exploit=members,
    parent=members,
    step=replicated,
  )
