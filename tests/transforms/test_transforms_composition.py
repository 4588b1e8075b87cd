"""Every game scheme x common optax processing, composed inside and outside.

The composition rule (docs/game-optimizers.md, "Composing game transforms"): every field a step
uses passes through the same processing. Processing INSIDE a scheme
(``extragradient(chain(clip, sgd))``) or AROUND it
(``with_field_processing(extragradient(sgd), clip)``, stateless processing
only) does so; processing chained IN FRONT of a scheme that evaluates more
fields itself (``chain(clip, extragradient(sgd))``) would reach only the first
field and raises through ``game_step``. ``apply_if_finite`` around a scheme acts
on the whole step: it checks the field at the params (optax's semantics).

Each case runs a few ``game_step``s on a game whose field is a known constant
``R`` (large, so clips bind) and records, through a ``jax.debug.callback`` in
the innermost optimizer, every field that reaches it; the processing's
postcondition must hold on every recorded field, and every field evaluation
must have been recorded (none skipped the processing).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import minmaxlab as mml

SCHEMES = ("gda", "alternating", "extragradient", "optimistic")
FETCHING = {"alternating", "extragradient"}  # evaluate the game at new points themselves
EVALS_PER_STEP = {"gda": 1, "optimistic": 1, "extragradient": 2, "alternating": 2}
PROCESSINGS = (
  "clip",
  "clip_by_global_norm",
  "scale_by_schedule",
  "masked",
  "apply_if_finite",
  "inject_hyperparams",
  "multisteps",
)
STATEFUL = {"scale_by_schedule", "apply_if_finite", "inject_hyperparams", "multisteps"}
WRAPS_OPTIMIZER = {"apply_if_finite", "multisteps"}  # optax wrappers, not chain elements
PLACEMENTS = ("inside", "outside", "with_field_processing")
LR = 0.01


def _is_min(x) -> bool:
  return jnp.shape(x) == (2,)  # the min player has 2 coordinates, the max player 3


def recording_sgd(log: list) -> optax.GradientTransformation:
  """``sgd(LR)`` that records every field reaching it (a Players or one player's array)."""

  def init_fn(params):
    del params
    return optax.EmptyState()

  def update_fn(updates, state, params=None):
    del params
    jax.debug.callback(lambda g: log.append(jax.tree.map(np.asarray, g)), updates)
    return jax.tree.map(lambda g: -LR * g, updates), state

  return optax.GradientTransformation(init_fn, update_fn)


def processing(name: str, c: float, s: float):
  """``name`` as a chain element (``wrap=None``) or as a wrapper of an optimizer."""
  if name == "clip":
    return optax.clip(c), None
  if name == "clip_by_global_norm":
    return optax.clip_by_global_norm(c), None
  if name == "scale_by_schedule":
    return optax.scale_by_schedule(lambda n: s), None
  if name == "masked":  # clip the min player's leaves only
    return optax.masked(optax.clip(c), lambda t: jax.tree.map(_is_min, t)), None
  if name == "inject_hyperparams":
    return optax.inject_hyperparams(optax.clip_by_global_norm)(max_norm=c), None
  if name == "apply_if_finite":
    return None, lambda tx: optax.apply_if_finite(tx, 3)
  if name == "multisteps":
    return None, lambda tx: optax.MultiSteps(tx, every_k_schedule=2).gradient_transformation()
  raise AssertionError(name)


def scheme(name: str, inner):
  return {
    "gda": lambda t: t,
    "alternating": mml.alternating,
    "extragradient": mml.extragradient,
    "optimistic": mml.optimistic,
  }[name](inner)


def around(name: str, tx):
  return {
    "none": lambda t: t,
    "lookahead": lambda t: mml.lookahead_minmax(t, sync_period=2, slow_step_size=0.5),
    "ema": lambda t: mml.transforms.ema(t, decay=0.9),
  }[name](tx)


def build(scheme_name, proc_name, placement, wrapper, c, s, log):
  chained, wrap = processing(proc_name, c, s)
  rec = recording_sgd(log)
  if placement == "inside":
    inner = wrap(rec) if wrap else optax.chain(chained, rec)
    return around(wrapper, scheme(scheme_name, inner))
  tx = around(wrapper, scheme(scheme_name, rec))
  if placement == "outside":
    return wrap(tx) if wrap else optax.chain(chained, tx)
  if wrap:  # with_field_processing takes a chain element; a wrapper's parts are stateful
    return mml.with_field_processing(tx, optax.apply_if_finite(optax.identity(), 3))
  return mml.with_field_processing(tx, chained)


def expected_error(scheme_name, proc_name, placement):
  if placement == "with_field_processing" and proc_name in STATEFUL:
    return "stateless processing"
  if placement == "outside" and scheme_name in FETCHING and proc_name == "multisteps":
    return "vector_field=None.*MultiSteps"  # optax.MultiSteps drops the extra arguments
  if placement == "outside" and scheme_name in FETCHING and proc_name != "apply_if_finite":
    return "chained in front"
  return None


def postcondition(proc_name, g, c, s, r):
  """The processing's documented effect on one field ``g`` that reached the optimizer."""
  tol = 1e-5 * max(1.0, c)
  pieces = [("min", x) if _is_min(x) else ("max", x) for x in jax.tree.leaves(g)]
  raw = {"min": np.asarray(r.min), "max": np.asarray(r.max)}
  if proc_name == "clip":
    assert all(np.max(np.abs(x)) <= c + tol for _, x in pieces)
  elif proc_name in ("clip_by_global_norm", "inject_hyperparams"):
    norm = np.sqrt(sum(np.sum(np.square(x)) for _, x in pieces))
    assert norm <= c + tol, (norm, c)
  elif proc_name == "scale_by_schedule":
    for who, x in pieces:
      np.testing.assert_allclose(x, s * raw[who], rtol=1e-5)
  elif proc_name == "masked":
    for who, x in pieces:
      if who == "min":
        assert np.max(np.abs(x)) <= c + tol
      else:
        np.testing.assert_allclose(x, raw["max"], rtol=1e-6)
  elif proc_name == "apply_if_finite":
    assert all(np.all(np.isfinite(x)) for _, x in pieces)
  elif proc_name == "multisteps":  # the mean of k equal constant fields is the field
    for who, x in pieces:
      np.testing.assert_allclose(x, raw[who], rtol=1e-5)


def run_steps(tx, r, steps, nan_at=None):
  """``steps`` game steps on the constant field ``r``; NaN at evaluation ``nan_at`` of step 0."""
  params = mml.Players(jnp.zeros(2), jnp.zeros(3))
  opt_state = tx.init(params)
  updates = []
  # Op by op: the same code without compiling each case's conds (apply_if_finite, MultiSteps).
  with jax.disable_jit():
    for t in range(steps):
      updates.append(None)

      def field_fn(p, i, t=t):
        bad = t == 0 and i == nan_at
        return jax.tree.map(lambda x: jnp.full_like(x, jnp.nan) if bad else x, r)

      new, opt_state, _ = mml.game_step(tx, field_fn, params, opt_state)
      updates[-1] = jax.tree.map(jnp.subtract, new, params)
      params = new
  jax.effects_barrier()
  return updates


fields = st.tuples(
  st.lists(st.floats(10.0, 100.0), min_size=2, max_size=2),
  st.lists(st.floats(-100.0, -10.0), min_size=3, max_size=3),
).map(lambda t: mml.Players(jnp.asarray(t[0]), jnp.asarray(t[1])))


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("proc_name", PROCESSINGS)
@pytest.mark.parametrize("scheme_name", SCHEMES)
@settings(max_examples=2, deadline=None, derandomize=True, phases=(Phase.generate,))
@given(
  wrapper=st.sampled_from(("none", "lookahead", "ema")),
  c=st.floats(0.1, 5.0),
  s=st.floats(1e-3, 0.1),
  r=fields,
  steps=st.integers(1, 2),
  nan_at=st.sampled_from((None, 0, 1)),
)
def test_every_field_gets_the_processing_or_it_raises(
  scheme_name, proc_name, placement, wrapper, c, s, r, steps, nan_at
):
  if proc_name != "apply_if_finite":
    nan_at = None
  if proc_name == "multisteps":
    steps *= 2  # MultiSteps(k=2) reaches the optimizer every second call
  log = []
  error = expected_error(scheme_name, proc_name, placement)
  if error:
    with pytest.raises(ValueError, match=error):
      tx = build(scheme_name, proc_name, placement, wrapper, c, s, log)
      run_steps(tx, r, steps)
    return
  tx = build(scheme_name, proc_name, placement, wrapper, c, s, log)
  updates = run_steps(tx, r, steps, nan_at)
  evals = EVALS_PER_STEP[scheme_name]
  if proc_name == "apply_if_finite" and placement == "outside":
    # optax.apply_if_finite around the scheme acts on the whole step and checks the field
    # it is given (the one at the params): a non-finite one skips the step ...
    step0 = jax.tree.leaves(updates[0])
    if nan_at == 0:
      assert all(float(jnp.max(jnp.abs(x))) == 0.0 for x in step0)
      assert len(log) == (steps - 1) * evals
    else:
      assert len(log) == steps * evals
    # ... while a field the scheme fetches itself is not checked (documented; put
    # apply_if_finite inside the scheme to check every field).
    if nan_at == 1 and scheme_name in FETCHING:
      assert not all(bool(jnp.all(jnp.isfinite(x))) for x in step0)
    return
  for g in log:
    postcondition(proc_name, g, c, s, r)
  # Every evaluated field reached the optimizer through the processing (none skipped it):
  # MultiSteps reaches it every k-th call; a field apply_if_finite rejects never does.
  # (optax's MultiSteps calls its optimizer on every call and masks the result.)
  expected = steps * evals
  if nan_at is not None and nan_at < evals:
    expected -= 1
  assert len(log) == expected


def test_issue_table_rerun():
  """Issue 13's table: a bound of 1.0 on every field used, or a clear error."""
  from experiments.bilinear import composition_table  # noqa: PLC0415

  rows = {
    r["composition"]: r
    for r in map(lambda kv: composition_table.run(*kv), composition_table.compositions().items())
  }
  for name, row in rows.items():
    if name.startswith("optax.chain(clip, extragradient") or name.startswith(
      "optax.chain(clip, alternating"
    ):
      assert "chained in front" in row["error"], row
    else:
      assert row["max_field_norm_used"] <= 1.0 + 1e-5, row
  assert rows["extragradient(optax.chain(clip, sgd))"]["update_norm"] == pytest.approx(1.0)
  # alternating: per player the clip bounds each half (joint norm up to sqrt(2)); the joint
  # wrapper bounds both halves of every field together.
  assert rows["alternating(optax.chain(clip, sgd)) (per player)"]["update_norm"] == pytest.approx(
    2**0.5, abs=1e-3
  )
  assert rows["with_field_processing(alternating(sgd), clip) (joint)"]["update_norm"] < 1.2


def test_joint_clip_in_alternating_matches_a_hand_computed_step():
  """with_field_processing(alternating(sgd), clip_by_global_norm(1)): each player's step
  uses its half of the field clipped by the JOINT norm at that point; inside alternating's
  inner the clip is per player."""
  lr = 0.1

  def field_fn(p, i):
    return mml.Players(30.0 + p.max[:2], jnp.full(3, -40.0) - p.min[0])

  def joint_clip(v):
    scale = max(1.0, float(np.linalg.norm(np.concatenate(v))))
    return [part / scale for part in v]

  x, y = np.zeros(2), np.zeros(3)
  y1 = y - lr * joint_clip([30.0 + y[:2], -40.0 - x[0] * np.ones(3)])[1]
  x1 = x - lr * joint_clip([30.0 + y1[:2], -40.0 - x[0] * np.ones(3)])[0]

  clip = optax.clip_by_global_norm(1.0)
  params = mml.Players(jnp.zeros(2), jnp.zeros(3))
  joint = mml.with_field_processing(mml.alternating(optax.sgd(lr)), clip)
  new, _, _ = mml.game_step(joint, field_fn, params, joint.init(params))
  np.testing.assert_allclose(new.min, x1, rtol=1e-5)
  np.testing.assert_allclose(new.max, y1, rtol=1e-5)

  per_player = mml.alternating(optax.chain(clip, optax.sgd(lr)))
  new, _, _ = mml.game_step(per_player, field_fn, params, per_player.init(params))
  np.testing.assert_allclose(np.linalg.norm(new.max), lr, rtol=1e-5)  # its own half, norm 1
  np.testing.assert_allclose(np.linalg.norm(new.min), lr, rtol=1e-5)
