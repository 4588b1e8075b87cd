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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from minmaxlab.pbt._space import Space, explore_values, sample_values
from minmaxlab.pbt._store import Trial
from minmaxlab.pbt._vectorized import truncation_size

EXPLOITS = ("tournament", "truncation", "none")


class Policy(NamedTuple):
  """How a finished trial chooses its child's parent and hyperparameters.

  Attributes:
    space: the explored hyperparameters.
    exploit: ``"tournament"``, ``"truncation"`` or ``"none"``.
    truncation_fraction, resample_probability, perturb_factors: as in
      :func:`minmaxlab.pbt.explore`.
  """

  space: Space
  exploit: str = "tournament"
  truncation_fraction: float = 0.25
  resample_probability: float = 0.25
  perturb_factors: tuple[float, ...] = (0.8, 1.2)

  def validate(self, population_size: int) -> Policy:
    """``self`` if it can select in a population of ``population_size``; else ``ValueError``."""
    if self.exploit not in EXPLOITS:
      raise ValueError(
        f"exploit must be 'tournament', 'truncation' or 'none', got {self.exploit!r}"
      )
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
  if policy.exploit == "tournament":
    opponent = others[int(rng.integers(len(others)))]
    winner = opponent if opponent.fitness > t.fitness else t
    return winner, _explore(rng, policy, winner.hparams)
  members = sorted(population.values(), key=lambda p: (-p.fitness, p.id))
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
  return Child(parent, hparams, int(rng.integers(2**31)))
