"""Lipizzaner's rescoring without selection (``CoevolutionConfig.rescore_own="trained"``).

Without selection Lipizzaner trains the cell's own individuals in place and then
re-evaluates them against ``all_discriminators`` / ``all_generators``, which hold the cell's
own individuals as the same objects: the rescoring of the trained generator plays the
trained discriminator of the cell (and the other way round), while the neighbours' are the
copies pulled at the generation's start. The library's default rescoring plays the pool as
it was at the start of the generation (the cell's own pre-training individuals).
"""

from __future__ import annotations

import jax

from minmaxlab.coevolution._phases import FitnessBatch, Pool
from minmaxlab.games import Players


def with_trained_own(pair, pool: Pool, batch: FitnessBatch, trained: Players):
  """``(pool, batch)`` with the cell's own slots (``< P``) holding the ``trained``
  individuals (``Players`` of ``[P, ...]``): their parameters, their real logits and, with
  shared fitness noise, their fakes."""
  P = jax.tree.leaves(trained.min)[0].shape[0]
  put = lambda every, new: jax.tree.map(lambda a, n: a.at[:P].set(n), every, new)
  params = Players(put(pool.params.min, trained.min), put(pool.params.max, trained.max))
  d_real = batch.d_real.at[:P].set(
    jax.vmap(pair.discriminator.apply, (0, None))(trained.max, batch.real)
  )
  fakes = batch.fakes
  if fakes is not None:
    fakes = fakes.at[:P].set(jax.vmap(pair.generator.apply, (0, None))(trained.min, batch.z))
  return pool._replace(params=params), batch._replace(d_real=d_real, fakes=fakes)
