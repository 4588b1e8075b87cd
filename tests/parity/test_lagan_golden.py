"""The library's game optimizers against the ORIGINAL LAGAN code's output (golden files).

``tests/parity/data/lagan_<case>.npz`` hold what Chavdarova et al.'s own code (the MNIST
notebook's ``train`` and ``Lookahead``; ``lagan/trainer.py``'s ``_update_pair`` and
``lagan/optim/lookahead.py``) computed from the inputs of ``experiments.parity.lagan_inputs``
(regenerate: experiments/parity/README.md). Here the same inputs go through the library's
public transforms, without torch, and the parameters after 1, 10 and 200 steps (generator,
discriminator, and the reference's averaged generators G_ema, G_avg, G_ema_slow) must agree.

Tolerances (absolute, on parameters of size ~0.1-0.5; Adam steps are 1e-4 to 1e-3):

- float32, steps 1 and 10: ``ATOL32 = 2e-6``. Both sides round differently (summation
  orders in the matmuls, BCE and Adam written differently); the reference's own float32 run
  sits within 2.3e-7 of its float64 run at step 10 (``float32_vs_float64_max_abs`` in each
  sidecar), and the library within a few 1e-7 of it.
- float64 on both sides, steps 1, 10 and 200: ``ATOL64 = 1e-6`` (the float64 run is stored
  rounded to float32, a few 1e-8). The 200-step comparison is made in float64 because in
  float32 it is not a property of the code: a threshold crossed by rounding (the notebook's
  AltGAN, near step 109) sends two valid float32 computations 1e-3 apart, while the float64
  runs of both sides agree to the storage rounding.

Every golden file also catches a perturbed reference-exact option (``PERTURBED``): after 200
steps its mismatch must exceed ``CAUGHT = 1e-4`` (100x ``ATOL64``).
"""

from __future__ import annotations

import functools
import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab as mml
from experiments.parity import lagan_inputs as li

DATA = pathlib.Path(__file__).parent / "data"
ATOL32, ATOL64 = 2e-6, 1e-6
CAUGHT = 1e-4
NB = dict(lr=1e-3, b1=0.05, b2=0.999)  # the notebook's Adam
K, ALPHA, EMA = 5, 0.5, 0.9999


def _mlp(params, x, hidden, out):
  n = len(params) // 2
  for i in range(n):
    x = x @ params[f"l{i}.weight"].T + params[f"l{i}.bias"]
    x = hidden(x) if i < n - 1 else out(x)
  return x


def gen(g, z):
  return _mlp(g, z, jax.nn.relu, jnp.tanh)


def disc(d, x):
  return _mlp(d, x, lambda h: jax.nn.leaky_relu(h, 0.2), lambda h: h)


def bce_losses(p, batch):
  """The notebook's losses: BCE with logits, the generator's non-saturating."""
  z_g, real, z_d = batch
  fake_d = jax.lax.stop_gradient(gen(p.min, z_d))
  loss_d = jnp.mean(jax.nn.softplus(-disc(p.max, real))) + jnp.mean(
    jax.nn.softplus(disc(p.max, fake_d))
  )
  loss_g = jnp.mean(jax.nn.softplus(-disc(p.max, gen(p.min, z_g))))
  return loss_g, loss_d


def hinge_losses(p, batch):
  """The trainer's ``adv_loss='hinge'``."""
  z_g, real, z_d = batch
  fake_d = jax.lax.stop_gradient(gen(p.min, z_d))
  loss_d = jnp.mean(jax.nn.relu(1.0 - disc(p.max, real))) + jnp.mean(
    jax.nn.relu(1.0 + disc(p.max, fake_d))
  )
  return -jnp.mean(disc(p.max, gen(p.min, z_g))), loss_d


# Which pool draws each field evaluation ``i`` of step ``t`` uses, read off the reference's
# call order: (z_G, real, z_D) as (noise index, real index, noise index) for each ``i``.
def _draw_plan(case, t):
  if case.startswith("notebook") and "extragrad" not in case:  # D: real, z; then G: z
    return [(2 * t + 1, t, 2 * t), (2 * t + 1, t, 2 * t)]
  if case.startswith("notebook"):  # G_extra: z; D_extra: real, z; D: real, z; G: z
    return [(4 * t, 2 * t, 4 * t + 1), (4 * t + 3, 2 * t + 1, 4 * t + 2)]
  if case == "trainer_la_altgan":  # 5 x (D: real, z), then G: z
    return [(6 * t + 5, 5 * t + min(j, 4), 6 * t + min(j, 4)) for j in range(6)]
  return [(4 * t + 1, 2 * t, 4 * t), (4 * t + 3, 2 * t + 1, 4 * t + 2)]  # D_extra, G_extra, D, G


@functools.cache
def inputs(dtype=np.float32):
  return {k: v.astype(dtype) for k, v in li.make_inputs().items()}


def _draws(case, steps, dtype):
  a = inputs(dtype)
  plan = np.array([_draw_plan(case, t) for t in range(steps)])  # [steps, evals, 3]
  return a["noise"][plan[..., 0]], a["real"][plan[..., 1]], a["noise"][plan[..., 2]]


def _initial(dtype):
  a = inputs(dtype)
  g = {k[2:]: jnp.asarray(v) for k, v in a.items() if k.startswith("g/")}
  d = {k[2:]: jnp.asarray(v) for k, v in a.items() if k.startswith("d/")}
  return mml.Players(g, d)


def _adam(lr, b1, b2):
  return optax.adam(lr, b1=b1, b2=b2, eps=1e-8)


def _notebook_tx(
  extragrad,
  lookahead,
  adam=None,
  slow_init="lazy",
  update_point="opponent_extrapolated",
  extrapolate_from="last_iterate",
):
  """The notebook's ``train``: its G_avg / G_ema are updated BEFORE the Lookahead sync, so
  the averages sit inside ``lookahead_minmax``; its extrapolation nets are reloaded before
  the sync too (``extrapolate_from="last_iterate"``)."""
  adam = adam or _adam(NB["lr"], NB["b1"], NB["b2"])
  if extragrad:
    scheme = mml.extragradient(adam, update_point=update_point, extrapolate_from=extrapolate_from)
  else:
    scheme = mml.alternating(adam)
  tx = mml.transforms.ema(mml.transforms.uniform(scheme, start_step=1), EMA)
  if lookahead:
    tx = mml.lookahead_minmax(tx, K, ALPHA, slow_init=slow_init)
  return tx, bce_losses


def _trainer_adam():
  return mml.per_player(min=_adam(1e-4, 0.0, 0.9), max=_adam(4e-4, 0.0, 0.9))


def _trainer_tx(case, slow_ema_decay=EMA, shared_state=False, max_steps=5):
  """``lagan/trainer.py``: TTUR Adam (g 1e-4, d 4e-4, betas (0, 0.9)), Lookahead k = 5,
  G_ema (every step) / G_avg after the sync, G_ema_slow once per sync."""
  if case == "trainer_la_altgan":
    scheme = mml.alternating(_trainer_adam(), max_steps=max_steps)
  else:
    scheme = mml.extragradient(
      _trainer_adam(), shared_state=shared_state, update_point="opponent_extrapolated"
    )
  tx = mml.lookahead_minmax(scheme, K, ALPHA, slow_init="lazy")
  tx = mml.transforms.slow_ema(tx, slow_ema_decay)
  return mml.transforms.ema(mml.transforms.uniform(tx, start_step=1), EMA), hinge_losses


def _averages(state):
  """The AveragingStates from the outside in: ema, uniform[, slow_ema]."""
  kind = mml.transforms.AveragingState
  found = []
  while True:
    outer = [
      x
      for x in jax.tree.leaves(state, is_leaf=lambda x: isinstance(x, kind))
      if isinstance(x, kind)
    ]
    if not outer:
      return found
    found.append(outer[0])
    state = outer[0].inner_state


def run(tx, losses, case, steps, dtype):
  """``steps`` game steps; the players and averaged generators at each snapshot."""
  field = mml.value_and_vector_field(losses)
  zg, real, zd = _draws(case, steps, dtype)

  def step(carry, xs):
    params, state = carry
    params, state, _ = mml.game_step(
      tx, lambda p, i: field(p, (xs[0][i], xs[1][i], xs[2][i])), params, state
    )
    avgs = _averages(state)
    out = dict(g=params.min, d=params.max, g_ema=avgs[0].average.min, g_avg=avgs[1].average.min)
    if len(avgs) > 2:
      out["g_ema_slow"] = avgs[2].average.min
    return (params, state), out

  params = _initial(dtype)
  _, traj = jax.jit(lambda c, xs: jax.lax.scan(step, c, xs))(
    (params, tx.init(params)), (zg, real, zd)
  )
  return {s: jax.tree.map(lambda x: np.asarray(x[s - 1]), traj) for s in li.SNAPSHOTS if s <= steps}


def golden(case):
  with np.load(DATA / f"lagan_{case}.npz") as f:
    arrays = dict(f)
  return arrays, json.loads((DATA / f"lagan_{case}.json").read_text())


def gap(ours, case, snapshot, precision):
  """The largest |library - reference| over every recorded net at one snapshot, against
  the reference's float32 (``"f32"``) or float64 (``"f64"``) run."""
  ref, _ = golden(case)
  return max(
    float(np.max(np.abs(value - ref[f"{precision}/s{snapshot}/{net}/{name}"])))
    for net, params in ours[snapshot].items()
    for name, value in params.items()
  )


def simulate(make, case, precision):
  """Float32: the first 10 steps; float64 (both sides): all 200."""
  if precision == "f32":
    return run(*make(), case, 10, np.float32)
  with jax.enable_x64(True):
    return run(*make(), case, li.STEPS, np.float64)


CASES = {
  "notebook_altgan": lambda: _notebook_tx(False, False),
  "notebook_la_altgan": lambda: _notebook_tx(False, True),
  "notebook_extragrad": lambda: _notebook_tx(True, False),
  "notebook_la_extragrad": lambda: _notebook_tx(True, True),
  "trainer_la_altgan": lambda: _trainer_tx("trainer_la_altgan"),
  "trainer_la_extra": lambda: _trainer_tx("trainer_la_extra"),
}
# One reference-exact option per golden file, perturbed: the comparison must fail.
PERTURBED = {
  "notebook_altgan": (
    "Adam b1 = 0.9 (optax's default), not the notebook's 0.05",
    lambda: _notebook_tx(False, False, adam=_adam(NB["lr"], 0.9, NB["b2"])),
  ),
  "notebook_la_altgan": (
    "eager slow weights (slow_init='params'), not the reference's lazy init",
    lambda: _notebook_tx(False, True, slow_init="params"),
  ),
  "notebook_extragrad": (
    "textbook EG update point, not the reference's opponent-extrapolated one",
    lambda: _notebook_tx(True, False, update_point="extrapolated"),
  ),
  "notebook_la_extragrad": (
    "extrapolation from the synced params, not the notebook's last iterate",
    lambda: _notebook_tx(True, True, extrapolate_from="params"),
  ),
  "trainer_la_altgan": (
    "slow-weight EMA decay 0.999**k per sync (the study's), not 0.9999",
    lambda: _trainer_tx("trainer_la_altgan", slow_ema_decay=0.999**K),
  ),
  "trainer_la_extra": (
    "one Adam state shared by extrapolation and update, not separate ones",
    lambda: _trainer_tx("trainer_la_extra", shared_state=True),
  ),
}
ATOLS = {"f32": ATOL32, "f64": ATOL64}


@functools.cache
def reference_exact(case, precision):
  return simulate(CASES[case], case, precision)


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_file_records_these_inputs(case):
  _, side = golden(case)
  assert side["inputs_sha256"] == li.digest(li.make_inputs())
  assert side["snapshots"] == list(li.SNAPSHOTS)
  for s, (n_noise, n_real) in side["draws_at_snapshots"].items():  # the plan's draw counts
    plan = np.array([_draw_plan(case, t) for t in range(int(s))])
    assert n_noise == len(np.unique(np.concatenate([plan[..., 0].ravel(), plan[..., 2].ravel()])))
    assert n_real == len(np.unique(plan[..., 1]))
  assert side["tolerance"] == {
    "float32_steps_1_10_max_abs": ATOL32,
    "float64_steps_1_10_200_max_abs": ATOL64,
    "perturbed_option_min_abs_at_200": CAUGHT,
  }
  floor = side["float32_vs_float64_max_abs"]
  assert floor["1"] < ATOL32 / 4 and floor["10"] < ATOL32 / 4


@pytest.mark.slow  # one compile of 200 (f64) or 10 (f32) steps each
@pytest.mark.parametrize("precision", ["f32", "f64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_library_matches_the_original(case, precision):
  ours = reference_exact(case, precision)
  for snapshot in ours:
    assert gap(ours, case, snapshot, precision) < ATOLS[precision], (case, snapshot)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(PERTURBED))
def test_perturbed_option_is_caught(case):
  _, make = PERTURBED[case]
  ours = simulate(make, case, "f64")
  assert gap(ours, case, li.STEPS, "f64") > CAUGHT


@pytest.mark.parametrize(
  "args, named",
  [
    (["--lagan", "/nonexistent/lagan", "--python", sys.executable], "/nonexistent/lagan"),
    (["--lagan", str(DATA), "--python", sys.executable], str(DATA)),
  ],
)
def test_golden_script_refuses_a_bad_checkout_in_one_line(args, named, tmp_path):
  cmd = [sys.executable, "-m", "experiments.parity.lagan_golden", *args, "--out", str(tmp_path)]
  got = subprocess.run(cmd, capture_output=True, text=True, cwd=DATA.parents[2], timeout=120)
  assert got.returncode == 2
  assert got.stderr.count("\n") == 1 and named in got.stderr and "error:" in got.stderr
  assert not list(tmp_path.iterdir())
