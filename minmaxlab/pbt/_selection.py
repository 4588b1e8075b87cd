"""Black-box PBT selection policies: pure functions of the population table and a seed.

Nothing here touches the store, the file system or a process: the controller
reads the population, calls these, and writes what they return. Each decision
draws from ``numpy.random.default_rng([seed, trial_id])``, so it does not
depend on how many times the controller was restarted.

- ``"tournament"`` (Li et al. 2019, initiator-based binary tournament): the
  initiator meets a uniformly drawn other member of the current population;
  the fitter of the two (the initiator on a tie) is the winner, and the child
  warm-starts from the winner's checkpoint with the winner's hyperparameters
  explored. An initiator that wins is therefore mutated too.
- ``"truncation"``: an initiator in the bottom ``truncation_fraction`` of the
  current population copies a uniformly drawn top member and explores.
- ``"none"``: every member continues its own lineage with its initial
  hyperparameters (random search, the baseline PBT is compared against).

Fitness is higher-is-better here, as everywhere in :mod:`minmaxlab.pbt`.
"Fitter" means a higher score of the policy's ranking
(:mod:`minmaxlab.pbt._objectives`: the fitness itself by default; Pareto rank,
a weighted sum or a user comparison for multi-objective fitness), computed over
the current population.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple, get_args

import numpy as np

from minmaxlab.pbt._objectives import Ranking, scalar, trial_objectives
from minmaxlab.pbt._space import Space, explore_values, sample_values
from minmaxlab.pbt._store import Trial
from minmaxlab.pbt._vectorized import truncation_size

Exploit = Literal["tournament", "truncation", "none"]
EXPLOITS = get_args(Exploit)


class Policy(NamedTuple):
  """How a finished trial chooses its child's parent and hyperparameters.

  Attributes:
    space: the explored hyperparameters.
    exploit: ``"tournament"``, ``"truncation"`` or ``"none"``.
    truncation_fraction, resample_probability, perturb_factors: as in
      :func:`minmaxlab.pbt.explore`.
    ranking: how fitness (objectives) compares (default :func:`minmaxlab.pbt.scalar`).
  """

  space: Space
  exploit: Exploit = "tournament"
  truncation_fraction: float = 0.25
  resample_probability: float = 0.25
  perturb_factors: tuple[float, ...] = (0.8, 1.2)
  ranking: Ranking = scalar()

  def validate(self, population_size: int) -> Policy:
    """``self`` if it can select in a population of ``population_size``; else ``ValueError``."""
    if self.exploit not in EXPLOITS:
      raise ValueError(f"exploit must be one of {EXPLOITS}, got {self.exploit!r}")
    if not 0.0 < self.truncation_fraction <= 0.5:  # (also where unused: a value that means nothing)
      raise ValueError(f"truncation_fraction must be in (0, 0.5], got {self.truncation_fraction!r}")
    if self.exploit == "truncation":
      truncation_size(int(population_size), self.truncation_fraction)
    return self


class Child(NamedTuple):
  """A trial to create: warm-start from ``parent`` with ``hparams`` and ``seed``."""

  parent: Trial
  hparams: dict
  seed: int


def initial_population(
  seed: int, space: Space, population_size: int, initial_hparams: Mapping[str, Any] | None = None
) -> list[tuple[dict, int]]:
  """``(hparams, trial_seed)`` of each member's first trial: prior draws from
  ``default_rng([seed, 0])`` with ``initial_hparams`` merged over them."""
  rng = np.random.default_rng([seed, 0])
  out = []
  for _ in range(population_size):
    hp = {**sample_values(rng, space), **(initial_hparams or {})}
    out.append((hp, int(rng.integers(2**31))))
  return out


def _explore(rng, policy: Policy, hparams: Mapping[str, Any]) -> dict:
  return explore_values(
    rng, hparams, policy.space, policy.resample_probability, policy.perturb_factors
  )


def choose_parent(
  rng: np.random.Generator, initiator: Trial, population: Mapping[int, Trial], policy: Policy
) -> tuple[Trial, dict]:
  """The parent of ``initiator``'s child and the child's hyperparameters.

  ``population`` maps member -> its current trial (``initiator`` included once
  it entered the population). Returns ``(initiator, its hparams)`` when the
  initiator continues its own lineage unchanged.
  """
  t = initiator
  others = [p for m, p in sorted(population.items()) if m != t.member and p.fitness is not None]
  if not others or policy.exploit == "none":
    return t, dict(t.hparams)
  pool = {p.id: p for p in [*population.values(), t] if p.fitness is not None}
  ids = sorted(pool)
  scores = policy.ranking.scores([trial_objectives(pool[i]) for i in ids])
  score = dict(zip(ids, scores))
  score_of = lambda p: score.get(p.id, -np.inf)  # noqa: E731  (no fitness: NaN reported)
  if policy.exploit == "tournament":
    opponent = others[int(rng.integers(len(others)))]
    winner = opponent if score_of(opponent) > score_of(t) else t
    return winner, _explore(rng, policy, winner.hparams)
  members = sorted(population.values(), key=lambda p: (-score_of(p), p.id))
  n = truncation_size(len(members), policy.truncation_fraction) if len(members) >= 2 else 0
  if n and t.id in {p.id for p in members[len(members) - n :]}:
    source = members[:n][int(rng.integers(n))]
    return source, _explore(rng, policy, source.hparams)
  return t, dict(t.hparams)


def next_child(
  seed: int, initiator: Trial, population: Mapping[int, Trial], policy: Policy
) -> Child:
  """The child of a finished ``initiator`` (its decision seeded by ``[seed, initiator.id]``)."""
  rng = np.random.default_rng([seed, initiator.id])
  parent, hparams = choose_parent(rng, initiator, population, policy)
  return Child(parent=parent, hparams=hparams, seed=int(rng.integers(2**31)))


class EarlyStop(NamedTuple):
  """The early-stopping rule of black-box PBT (a quantile stopping rule).

  A member whose finished trial has trained at least ``min_steps`` steps in
  all (``start_step + steps``) and whose score (the policy's ranking over the
  current population) is strictly below the ``quantile`` of the population's
  scores (linear interpolation; ``0.5``: the median stopping rule of Golovin
  et al. 2017) is stopped: it gets no child, so its share of ``num_trials``
  goes to the members still running. The best member is never below the
  quantile, so at least one member always goes on.

  Attributes:
    min_steps: training steps a member must have before it can be stopped.
    quantile: in ``(0, 1)``.
  """

  min_steps: int
  quantile: float = 0.5

  def validate(self) -> EarlyStop:
    if int(self.min_steps) < 0 or not 0.0 < float(self.quantile) < 1.0:
      raise ValueError(f"early_stop needs min_steps >= 0 and 0 < quantile < 1, got {tuple(self)!r}")
    return self

  def hopeless(self, trial: Trial, population: Mapping[int, Trial], ranking: Ranking) -> bool:
    """Whether ``trial`` (its member's newest finished trial) stops its member."""
    if trial.start_step + trial.steps < self.min_steps:
      return False
    pool = {p.id: p for p in [*population.values(), trial] if p.fitness is not None}
    if trial.id not in pool or len(pool) < 2:
      return False
    ids = sorted(pool)
    scores = ranking.scores([trial_objectives(pool[i]) for i in ids])
    mine = scores[ids.index(trial.id)]
    return bool(mine < np.quantile(scores, float(self.quantile)))
