"""Compare every game optimizer on the full-batch bilinear game; print a table, save a plot."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

import minmaxlab as mml
from minmaxlab import analysis


def schemes(config) -> dict[str, optax.GradientTransformation]:
  """Every method of the comparison, each with and without joint lookahead."""
  sgd = lambda: optax.sgd(config.sgd_step_size)
  adam = lambda: optax.adam(config.adam_step_size, b1=config.adam_b1)
  base = {
    "gda": sgd,
    "alternating": lambda: mml.alternating(sgd()),
    "extragradient": lambda: mml.extragradient(sgd()),
    "optimistic": lambda: mml.optimistic(sgd()),
    "adam": adam,
    "extra_adam": lambda: mml.extragradient(adam()),
  }
  wanted = [m.strip() for m in config.methods.split(",") if m.strip()]
  unknown = sorted(set(wanted) - set(base))
  if unknown:
    raise ValueError(f"unknown methods {unknown}; choose from {sorted(base)}")
  out = {}
  for name in wanted:
    out[name] = base[name]()
    out[f"la_{name}"] = mml.lookahead_minmax(
      base[name](), config.sync_period, config.slow_step_size
    )
  return out


def closed_form_rate(name: str, config) -> float | None:
  """Per-step spectral radius from the closed forms (A = I, so sigma = 1)."""
  la = name.startswith("la_")
  base = name[3:] if la else name
  if base not in ("gda", "alternating", "extragradient", "optimistic"):
    return None
  eigs = analysis.closed_form_eigenvalues(
    base,
    config.sgd_step_size,
    np.array([1.0]),
    sync_period=config.sync_period if la else None,
    slow_step_size=config.slow_step_size,
  )
  rho = analysis.spectral_radius(eigs)
  return float(analysis.per_step_rate(rho, config.sync_period)) if la else float(rho)


def make_games(config):
  key = jax.random.key(config.seed)
  keys = jax.random.split(key, config.seeds)

  def one(k):
    kb, kc, kx, ky = jax.random.split(k, 4)
    d = config.dim
    s = 1.0 / jnp.sqrt(d)
    game = mml.games.bilinear(
      jnp.eye(d), s * jax.random.normal(kb, (d,)), s * jax.random.normal(kc, (d,))
    )
    start = mml.Players(s * jax.random.normal(kx, (d,)), s * jax.random.normal(ky, (d,)))
    return game, start

  return jax.vmap(one)(keys)


def train(config, workdir: str) -> dict:
  """Run the comparison; write ``results.json`` and ``distance.png`` to ``workdir``."""
  os.makedirs(workdir, exist_ok=True)
  games, starts = make_games(config)
  curves, rows = {}, []
  for name, tx in schemes(config).items():
    one_game = jax.tree.map(lambda x: x[0], games)
    per_step = analysis.field_evaluations_per_step(
      tx, mml.vector_field(one_game.loss), jax.tree.map(lambda x: x[0], starts)
    )
    steps = max(1, config.passes // per_step)
    traj = analysis.run_games(tx, games, starts, steps)
    dist = np.asarray(traj.distances["sum"], np.float64)
    curves[name] = (np.asarray(traj.passes), dist)
    final = dist[:, -1]
    rows.append(
      {
        "method": name,
        "passes_per_step": per_step,
        "steps": steps,
        "closed_form_rate_per_step": closed_form_rate(name, config),
        "start_distance": float(dist[:, 0].mean()),
        "final_distance_mean": float(np.mean(final)),
        "final_distance_std": float(np.std(final)),
      }
    )
  _print_table(rows, config)
  _plot(curves, config, os.path.join(workdir, "distance.png"))
  result = {"config": config.to_dict(), "results": rows}
  with open(os.path.join(workdir, "results.json"), "w") as f:
    json.dump(result, f, indent=1)
  print(f"wrote {workdir}/results.json and {workdir}/distance.png")
  return result


def _print_table(rows, config):
  print(
    f"Bilinear game d={config.dim}, A=I, {config.seeds} seeds, "
    f"{config.passes} passes (EG = 2 per step); lookahead k={config.sync_period}, "
    f"alpha={config.slow_step_size}"
  )
  head = (
    f"{'method':<20}{'passes/step':>12}{'rho/step':>11}{'start':>10}{'final (mean +- std)':>26}"
  )
  print(head)
  print("-" * len(head))
  for r in rows:
    rho = r["closed_form_rate_per_step"]
    rho = f"{rho:.4f}" if rho is not None else "-"
    final = f"{r['final_distance_mean']:.3e} +- {r['final_distance_std']:.1e}"
    print(
      f"{r['method']:<20}{r['passes_per_step']:>12}{rho:>11}{r['start_distance']:>10.3f}{final:>26}"
    )


def _plot(curves, config, path):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
  for ax, la in zip(axes, (False, True)):
    sub = {k: v for k, v in curves.items() if k.startswith("la_") == la}
    analysis.plot_distance_curves(sub, ax=ax)
    ax.set_title(("with" if la else "without") + f" lookahead (k={config.sync_period})")
    ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
