r"""Result studies of ``experiments/gan`` (issue 12), one resumable command each.

  python -m experiments.gan.results lookahead --seeds 0,1,2,3,4   # run (or resume) the study
  python -m experiments.gan.results lookahead --table             # table of the committed JSON

``lookahead``: Lookahead-minmax against its base method on Fashion-MNIST with the
Lipizzaner MLP pair (``configs/fashion_mnist_mlp.py``): AltGAN vs LA-AltGAN and
ExtraGrad vs LA-ExtraGrad, LA with the paper's MNIST sync period k = 1000 and its
CIFAR k = 5, alpha = 0.5. Every run is evaluated (classifier-FID, IS analogue, class
TVD) at the point the paper evaluates, the slow weights (for the base methods: the
iterate), and at an EMA of the fast weights and (LA only) an EMA of the slow weights
updated at syncs (``minmaxlab.transforms.slow_ema``). Evaluation steps are multiples
of k, where the fast weights equal the slow ones (they are reset at each sync), so the
fast weights need no evaluation of their own.

Each (arm, seed) trains in its own folder ``<runs>/<study>/<arm>_s<seed>`` with an
orbax checkpoint at every evaluation; a finished run (``result.json``) is skipped and
an interrupted one resumes from its checkpoint with identical numbers (every draw is
a function of ``(seed, step)``, as in ``train.py``). The study writes
``<out>/<study>.json`` (every run's curves) and ``<out>/<study>.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

ARMS = {
  "alt": {"scheme": "alternating", "lookahead": False},
  "la_alt_k5": {"scheme": "alternating", "lookahead": True, "sync_period": 5},
  "la_alt_k1000": {"scheme": "alternating", "lookahead": True, "sync_period": 1000},
  "eg": {"scheme": "extragradient", "lookahead": False},
  "la_eg_k5": {"scheme": "extragradient", "lookahead": True, "sync_period": 5},
  "la_eg_k1000": {"scheme": "extragradient", "lookahead": True, "sync_period": 1000},
}
LABELS = {
  "alt": "AltGAN",
  "la_alt_k5": "LA-AltGAN k=5",
  "la_alt_k1000": "LA-AltGAN k=1000",
  "eg": "ExtraGrad",
  "la_eg_k5": "LA-ExtraGrad k=5",
  "la_eg_k1000": "LA-ExtraGrad k=1000",
}
# Evaluation points: the slow weights (= the iterate without lookahead), the EMA of the
# fast weights, the EMA of the slow weights (lookahead only).
POINTS = ("slow", "ema", "slow_ema")
METRICS = ("fid", "inception_score", "class_tvd")
ROOT = Path(__file__).resolve().parent


def study_config(arm: str, seed: int, args):
  """The ``fashion_mnist_mlp`` config of one (arm, seed) with the study's budget."""
  from experiments.gan.configs import fashion_mnist_mlp

  c = fashion_mnist_mlp.get_config()
  c.seed = seed
  c.num_steps, c.eval_every, c.checkpoint_every = args.steps, args.eval_every, args.eval_every
  c.log_every = math.gcd(args.eval_every, 100)
  c.num_eval_samples = args.eval_samples
  c.lr_min, c.lr_max, c.b1, c.b2 = args.lr, args.lr, args.b1, 0.999
  c.batch_size = args.batch_size
  c.ema_decay = 0.0  # the study adds its own averages (below)
  c.tensorboard = c.progress = False
  for k, v in ARMS[arm].items():
    c[k] = v
  for item in args.set or ():  # "field=json value" or "field=text", dotted fields allowed
    name, value = item.split("=", 1)
    *parents, leaf = name.split(".")
    node = c
    for part in parents:
      node = node[part]
    if isinstance(node[leaf], str):
      node[leaf] = value
    else:
      node[leaf] = type(node[leaf])(json.loads(value))
  return c


def _tx(config, ema_horizon: float):
  """The scheme of ``config`` (``train.make_optimizer`` without EMA), wrapped in
  ``slow_ema`` (lookahead only; decay ``(1 - 1/H)^k``, the same horizon of ``H`` steps
  counted in syncs) and, outermost, ``ema`` of the fast weights (decay ``1 - 1/H``)."""
  import optax

  import minmaxlab
  from experiments.gan import train

  inner = train.make_optimizer(config)  # ema_decay = 0: scheme (+ lookahead) only
  beta = 1.0 - 1.0 / ema_horizon
  if config.lookahead:
    inner = minmaxlab.transforms.slow_ema(inner, beta**config.sync_period)
  return optax.with_extra_args_support(minmaxlab.transforms.ema(inner, beta))


def _points(config, state) -> dict:
  """The generators to evaluate: name -> generator params."""
  import minmaxlab

  opt = state.opt_state  # AveragingState(ema) around [AveragingState(slow_ema) around] the scheme
  out = {"ema": opt.average.min}
  if config.lookahead:
    out["slow"] = minmaxlab.lookahead_slow_params(opt).min
    out["slow_ema"] = opt.inner_state.average.min
  else:
    out["slow"] = state.params.min
  return out


_SHARED: dict = {}  # per process: the image evaluator (classifier + real statistics)


def _image_evaluator(config):
  from experiments import _classifier_cache

  key = (config.dataset, config.classifier.cache_dir, config.classifier.steps)
  if key not in _SHARED:
    _SHARED[key] = _classifier_cache.classifier_evaluator(
      config.dataset,
      cache_dir=config.classifier.cache_dir or None,
      data_dir=config.data_dir or None,
      steps=config.classifier.steps,
    )[0]
  return _SHARED[key]


def _chunk(exp, config):
  """``train.make_chunk`` with the training key as an argument, so one compiled program
  serves every seed (vmapped): the same draws as ``train.py`` for each seed."""
  import jax
  import optax

  import minmaxlab
  from experiments.gan import train

  vaf = minmaxlab.value_and_vector_field(exp.loss_fn)
  b, latent = config.batch_size, exp.pair.latent_dim

  def one(state, train_key):
    def minibatch(step_key, i):
      k_real, k_z, k_loss = jax.random.split(jax.random.fold_in(step_key, i), 3)
      return exp.sample_real(k_real, b), jax.random.normal(k_z, (b, latent)), k_loss

    def step(state, _):
      step_key = jax.random.fold_in(train_key, state.step)
      batches = [minibatch(step_key, i) for i in range(exp.num_evals)]
      _, field = vaf(state.params, *batches[0])
      updates, opt_state = exp.tx.update(
        field, state.opt_state, state.params, vector_field=lambda p, i: vaf(p, *batches[i])[1]
      )
      return train.TrainState(
        state.step + 1, optax.apply_updates(state.params, updates), opt_state
      ), None

    state, _ = jax.lax.scan(step, state, None, length=config.log_every)
    return state, train.all_finite(state.params)

  return jax.jit(jax.vmap(one))


def run_arm(config, seeds: list[int], run_dir: Path, ema_horizon: float, log=print) -> list[dict]:
  """Train one arm for every seed in ``seeds`` at once (one vmapped program) in
  ``run_dir``, resuming from its checkpoint; return one result per seed."""
  import jax

  import minmaxlab
  from experiments.gan import train
  from minmaxlab import runner

  run_dir = Path(run_dir)
  done = run_dir / "result.json"
  if done.exists():
    return json.loads(done.read_text())
  run_dir.mkdir(parents=True, exist_ok=True)
  train.check_config(config)
  exp = train.build(config)
  exp = exp._replace(tx=_tx(config, ema_horizon))
  keys = [jax.random.split(jax.random.key(s), 3) for s in seeds]  # (init, train, eval) per seed

  @jax.jit
  def init(init_keys):
    def one(key):
      k_g, k_d = jax.random.split(key)
      p = minmaxlab.Players(exp.pair.generator.init(k_g), exp.pair.discriminator.init(k_d))
      return train.TrainState(jax.numpy.zeros([], jax.numpy.int32), p, exp.tx.init(p))

    return jax.vmap(one)(init_keys)

  chunk = _chunk(exp, config)
  train_keys = jax.numpy.stack([k[1] for k in keys])
  generate = jax.jit(exp.pair.generator.apply)
  ckpt = runner.CheckpointManager(run_dir / "checkpoints", max_to_keep=1)
  rows_file = run_dir / "evals.jsonl"
  state = init(jax.numpy.stack([k[0] for k in keys]))
  rows: list[dict] = []  # one row per evaluation step: per-seed lists
  if ckpt.latest_step() is not None:
    state, _ = ckpt.restore(jax.eval_shape(lambda: state))
    rows = [r for r in runner.read_jsonl(rows_file) if r["step"] <= int(state.step[0])]
  step = int(state.step[0])
  cpu = rows[-1]["cpu_s"] if rows else 0.0
  diverged: dict[int, int] = {}
  while step < config.num_steps:
    t0 = time.process_time()
    for _ in range(config.eval_every // config.log_every):
      state, finite = chunk(state, train_keys)
      for i, ok in enumerate(np.asarray(finite)):
        if not ok and seeds[i] not in diverged:
          diverged[seeds[i]] = int(state.step[i])
    step = int(state.step[0])
    row: dict = {"step": step}
    for i in range(len(seeds)):
      z = jax.random.normal(
        jax.random.fold_in(keys[i][2], step), (config.num_eval_samples, exp.pair.latent_dim)
      )
      one = jax.tree.map(lambda x, i=i: x[i], state)
      evaluate_images = _image_evaluator(config)  # loaded once per process, at first use
      for name, g in _points(config, one).items():
        x = np.concatenate([np.asarray(generate(g, z[j : j + 500])) for j in range(0, len(z), 500)])
        m = evaluate_images(x) if np.all(np.isfinite(x)) else {k: math.inf for k in METRICS}
        for k in METRICS:
          row.setdefault(f"{name}/{k}", []).append(float(m[k]))
    cpu += time.process_time() - t0
    row["cpu_s"] = cpu
    rows.append(row)
    ckpt.save(step, state)
    tmp = rows_file.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(rows_file)
    log(
      f"{run_dir.name} step {step}: "
      + " ".join(f"{k}={np.mean(row[k]):.1f}" for k in row if k.endswith("/fid"))
      + f" (mean over seeds; cpu {cpu:.0f} s)"
    )
  results = []
  for i, seed in enumerate(seeds):
    curves = [{k: (v[i] if isinstance(v, list) else v) for k, v in r.items()} for r in rows]
    results.append(
      {
        "seed": seed,
        "steps": step,
        "diverged_at": diverged.get(seed),
        "cpu_s_all_seeds": cpu,
        "curves": curves,
      }
    )
  done.write_text(json.dumps(results))
  if rows:  # final samples of the slow weights (run folder only, not committed)
    for i, seed in enumerate(seeds):
      g = _points(config, jax.tree.map(lambda x, i=i: x[i], state))["slow"]
      z = jax.random.normal(jax.random.fold_in(keys[i][2], step), (64, exp.pair.latent_dim))
      runner.save_image_grid(run_dir / f"samples_slow_s{seed}.png", np.asarray(generate(g, z)))
  return results


def run_study(args, log=print) -> dict:
  """Run every arm (all seeds of an arm at once; finished arms are skipped), then
  write ``<out>/<study>.json`` and the figure."""
  seeds = [int(s) for s in args.seeds.split(",")]
  arms = args.arms.split(",")
  out_dir = Path(args.out)
  out_dir.mkdir(parents=True, exist_ok=True)
  path = out_dir / f"{args.study}.json"
  runs: list[dict] = []
  protocol = None
  for arm in arms:
    config = study_config(arm, seeds[0], args)
    if protocol is None:
      protocol = {
        k: v
        for k, v in config.to_dict().items()
        if k not in ("seed", "scheme", "lookahead", "sync_period", "classifier")
      }
      protocol.update(ema_horizon_steps=args.ema_horizon, classifier_steps=config.classifier.steps)
    folder = Path(args.runs) / args.study / f"{arm}_s{'-'.join(map(str, seeds))}"
    for r in run_arm(config, seeds, folder, args.ema_horizon, log):
      runs.append({"arm": arm, "label": LABELS[arm], **ARMS[arm], **r})
    write_results(out_dir, args.study, protocol, runs)
  return json.loads(path.read_text())


def write_results(out_dir: Path, study: str, protocol: dict, runs: list[dict]) -> None:
  """Merge ``runs`` into ``<out>/<study>.json`` (runs of other arms or seeds already there
  are kept, so several processes can run different arms) and redraw the figure."""
  import fcntl
  import hashlib
  import tempfile

  path = Path(out_dir) / f"{study}.json"
  tag = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
  with open(Path(tempfile.gettempdir()) / f"minmaxlab-results-{tag}.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    mine = {(r["arm"], r["seed"]) for r in runs}
    old = json.loads(path.read_text())["runs"] if path.exists() else []
    merged = [r for r in old if (r["arm"], r["seed"]) not in mine] + runs
    order = {arm: i for i, arm in enumerate(ARMS)}
    merged.sort(key=lambda r: (order.get(r["arm"], 99), r["seed"]))
    data = {"study": study, "protocol": protocol, "runs": merged}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":")))
    tmp.replace(path)
    plot(data, Path(out_dir) / f"{study}.png")


def _by_arm(data: dict) -> dict[str, list[dict]]:
  out: dict[str, list[dict]] = {}
  for r in data["runs"]:
    out.setdefault(r["arm"], []).append(r)
  return out


def plot(data: dict, path: Path) -> None:
  """FID against generator steps per arm (mean over seeds, band = min..max), one panel
  per evaluation point."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, len(POINTS), figsize=(4.2 * len(POINTS), 3.4), sharey=True)
  colors = dict(zip(ARMS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
  for ax, point in zip(axes, POINTS):
    for arm, runs in _by_arm(data).items():
      key = f"{point}/fid"
      curves = [r["curves"] for r in runs if r["curves"] and key in r["curves"][0]]
      if not curves:
        continue
      n = min(len(c) for c in curves)
      steps = np.array([row["step"] for row in curves[0][:n]])
      y = np.array([[row[key] for row in c[:n]] for c in curves], float)
      ax.plot(steps, y.mean(0), color=colors[arm], label=f"{LABELS[arm]} ({len(curves)})")
      ax.fill_between(steps, y.min(0), y.max(0), color=colors[arm], alpha=0.15)
    ax.set_title(
      {
        "slow": "slow weights (base: iterate)",
        "ema": "EMA of fast weights",
        "slow_ema": "EMA of slow weights",
      }[point],
      fontsize=9,
    )
    ax.set_xlabel("generator steps")
    ax.set_yscale("log")
  axes[0].set_ylabel("classifier-FID (mean, band min..max)")
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=70)
  plt.close(fig)


def _fmt_values(v: np.ndarray) -> str:
  mean = v.mean()
  std = v.std(ddof=1) if len(v) > 1 else 0.0
  return f"{mean:.1f} ± {std:.1f} ({', '.join(f'{x:.1f}' for x in v)})"


def table(data: dict, last: int = 1) -> str:
  """Markdown table: per arm, final classifier-FID at each evaluation point, mean ±
  sample std over seeds with every seed's value (``last > 1``: each run's mean over its
  last ``last`` evaluations), the IS analogue and class TVD at the slow weights."""
  head = ["method", "seeds", "steps", "FID slow", "FID EMA", "FID slow-EMA", "IS slow", "TVD slow"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for arm, runs in _by_arm(data).items():
    runs = [r for r in runs if r["curves"]]
    if not runs:
      continue
    cells = [LABELS.get(arm, arm), ",".join(str(r["seed"]) for r in runs)]
    steps = sorted({r["curves"][-1]["step"] for r in runs})
    div = [r["seed"] for r in runs if r.get("diverged_at") is not None]
    cells.append("/".join(map(str, steps)) + (f" (diverged: seeds {div})" if div else ""))
    for point, metric in [
      ("slow", "fid"),
      ("ema", "fid"),
      ("slow_ema", "fid"),
      ("slow", "inception_score"),
      ("slow", "class_tvd"),
    ]:
      key = f"{point}/{metric}"
      if key not in runs[0]["curves"][-1]:
        cells.append("-")
        continue
      v = np.array([np.mean([row[key] for row in r["curves"][-last:]]) for r in runs])
      cells.append(
        _fmt_values(v)
        if metric == "fid"
        else f"{v.mean():.3g} ± {(v.std(ddof=1) if len(v) > 1 else 0.0):.2g}"
      )
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("study", choices=["lookahead"])
  p.add_argument("--table", action="store_true", help="only print the table of <out>/<study>.json")
  p.add_argument("--last", type=int, default=1, help="table: mean of each run's last evaluations")
  p.add_argument("--seeds", default="0,1,2,3,4")
  p.add_argument("--arms", default="alt,la_alt_k5,eg,la_eg_k5")
  p.add_argument("--steps", type=int, default=4000, help="generator steps per run")
  p.add_argument("--eval-every", type=int, default=1000, help="a multiple of every k")
  p.add_argument("--eval-samples", type=int, default=2000)
  p.add_argument("--batch-size", type=int, default=50, help="the paper's MNIST batch: 50")
  p.add_argument("--lr", type=float, default=1e-3, help="Adam lr of both players (paper, MNIST)")
  p.add_argument("--b1", type=float, default=0.05, help="Adam b1 (the paper's MNIST: 0.05)")
  p.add_argument(
    "--ema-horizon",
    type=float,
    default=1000.0,
    help="EMA decay 1 - 1/H per step (slow EMA: (1 - 1/H)^k per sync)",
  )
  p.add_argument("--set", action="append", help="any config field: --set dataset=digits8")
  p.add_argument("--runs", default="runs/gan_results")
  p.add_argument("--out", default=str(ROOT / "results"))
  return p.parse_args(argv)


def main(argv=None) -> None:
  args = parse_args(argv)
  if args.table:
    data = json.loads((Path(args.out) / f"{args.study}.json").read_text())
    print(table(data, args.last))
    return
  from absl import logging

  logging.set_verbosity(logging.WARNING)
  data = run_study(args, log=lambda s: print(s, flush=True))
  print(table(data))


if __name__ == "__main__":
  main()
