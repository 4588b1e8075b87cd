r"""Result study of ``experiments/pbt`` (issue 12): PBT vs random search at equal budget
on LA-AltGAN Fashion-MNIST tuned by classifier-FID, then a replay from scratch.

  python -m experiments.pbt.results pbt_vs_rs --seeds 0,1,2     # run (or resume) the study
  python -m experiments.pbt.results pbt_vs_rs --table           # tables of the committed JSON

Per seed, the ``fashion_mnist_lagan`` task (``fashion.py``: lr_G, lr_D, the lookahead
slow step size and sync period explored) is tuned twice with the same controller,
population, trials and steps: ``exploit="tournament"`` (PBT, Li et al. 2019) and
``exploit="none"`` (random search: every member keeps its first draw). Trials are
scored at the lookahead SLOW weights (the paper's evaluation point; ``fashion.py``
scores the fast weights, which differ from the slow ones between syncs).

Replay (the warm-start/schedule claim): the best PBT lineage's hyperparameter schedule
and the best random-search trial's static hyperparameters are each re-trained from
scratch, for the same number of trials (the PBT lineage's length), with fresh seeds
(the same seeds for both), and scored after every trial.

Each (method, seed) runs in ``<runs>/pbt_vs_rs/<method>_s<seed>`` (the controller's
SQLite store: a killed run resumes with the same command; a finished one is skipped);
the replays of a seed are cached in ``replay_s<seed>.json``. Writes
``<out>/pbt_vs_rs.json`` and ``<out>/pbt_vs_rs.png``.

Version 1 (issue 34, pre-registered) is ``pbt_vs_rs_v1.py``, run by the study runner
(``python -m experiments.pbt.pbt_vs_rs_v1 run``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from experiments import _report
from experiments.pbt.search import (
  ROOT,
  replay,
  run_search,
  slow_eval_task,
  trial_keys,  # noqa: F401 (named by protocols/pbt_vs_rs.v1.json)
)

METHODS = {"pbt": "tournament", "random_search": "none"}


def study_config(args, seed: int, method: str):
  from experiments.pbt.configs import fashion_mnist_lagan

  c = fashion_mnist_lagan.get_config()
  c.seed, c.exploit = seed, METHODS[method]
  c.population_size, c.num_trials = args.population, args.trials
  c.steps_per_trial, c.batch_size, c.eval_samples = (
    args.steps_per_trial,
    args.batch_size,
    (args.eval_samples),
  )
  for item in args.set or ():  # "field=json value" or "field=text", dotted fields allowed
    name, value = item.split("=", 1)
    *parents, leaf = name.split(".")
    node = c
    for part in parents:
      node = node[part]
    node[leaf] = value if isinstance(node[leaf], str) else type(node[leaf])(json.loads(value))
  return c


def run_replays(args, seed: int, pbt_run: dict, rs_run: dict, folder: Path, log=print) -> dict:
  path = Path(folder) / f"replay_s{seed}.json"
  out = json.loads(path.read_text()) if path.exists() else {}
  config = study_config(args, seed, "pbt")
  schedule = [t["hparams"] for t in pbt_run["best_lineage"]]
  rs_best = next(t for t in rs_run["best_lineage"] if t["trial"] == rs_run["best_trial"])
  static = [rs_best["hparams"]] * len(schedule)
  task = slow_eval_task(config)
  out.setdefault("pbt_schedule", [task.describe(h) for h in schedule])
  out.setdefault("rs_static", task.describe(rs_best["hparams"]))
  for r in range(args.replay_seeds):
    for name, sched in (("pbt_schedule", schedule), ("rs_static", static)):
      key = f"{name}/{r}"
      if key in out:
        continue
      t0 = time.process_time()
      out[key] = {"fids": replay(config, sched, r), "cpu_s": time.process_time() - t0}
      log(f"replay seed {seed}/{r} {name}: final FID {out[key]['fids'][-1]:.1f}")
      _report.write_json(path, out, compact=False)
  return out


def run_study(args, log=print) -> dict:
  seeds = [int(s) for s in args.seeds.split(",")]
  folder = Path(args.runs or "runs/pbt_results") / "pbt_vs_rs"
  out_dir = Path(args.out)
  out_dir.mkdir(parents=True, exist_ok=True)
  path = out_dir / "pbt_vs_rs.json"
  data = json.loads(path.read_text()) if path.exists() else {"runs": [], "replays": []}
  cfg = study_config(args, seeds[0], "pbt")
  data["protocol"] = {
    k: cfg[k]
    for k in (
      "population_size",
      "num_trials",
      "steps_per_trial",
      "batch_size",
      "eval_samples",
      "lr_G_bounds",
      "lr_D_bounds",
      "slow_step_size_bounds",
      "sync_period_choices",
      "hidden",
      "latent_dim",
      "loss",
      "b1",
      "resample_probability",
      "top_k",
    )
  }
  data["protocol"]["replay_seeds"] = args.replay_seeds
  data["protocol"] = json.loads(json.dumps(data["protocol"]))  # tuples as JSON lists

  def save():
    data["runs"].sort(key=lambda r: (r["seed"], r["method"]))
    _report.write_json(path, data)
    plot(data, out_dir / "pbt_vs_rs.png")

  for seed in seeds:
    got = {}
    for method in METHODS:
      r = run_search(study_config(args, seed, method), folder / f"{method}_s{seed}", log)
      got[method] = r
      data["runs"] = [x for x in data["runs"] if (x["seed"], x["method"]) != (seed, method)]
      data["runs"].append({"method": method, **r})
      save()
    if args.replay_seeds:
      rep = run_replays(args, seed, got["pbt"], got["random_search"], folder, log)
      data["replays"] = [x for x in data["replays"] if x["seed"] != seed]
      data["replays"].append({"seed": seed, **rep})
      save()
  return data


def _best_so_far(run: dict) -> np.ndarray:
  return np.minimum.accumulate(np.array([t["fid"] for t in run["trials"]], float))


def plot(data: dict, path: Path) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
  colors = {"pbt": "C0", "random_search": "C1"}
  steps = data["protocol"]["steps_per_trial"]
  for r in data["runs"]:
    y = _best_so_far(r)
    axes[0].plot(
      np.arange(1, len(y) + 1) * steps,
      y,
      color=colors[r["method"]],
      alpha=0.8,
      label=f"{r['method']} s{r['seed']}",
    )
  axes[0].set_title("best FID so far vs total GAN steps", fontsize=9)
  axes[0].set_xlabel("GAN steps (all trials)")
  axes[0].set_ylabel("classifier-FID (slow weights)")
  axes[0].set_yscale("log")
  axes[0].legend(fontsize=6, ncol=2)
  for rep in data.get("replays", []):
    for key, val in rep.items():
      if "/" not in key:
        continue
      name = key.split("/")[0]
      y = np.array(val["fids"])
      axes[1].plot(
        np.arange(1, len(y) + 1) * steps,
        y,
        color="C0" if name == "pbt_schedule" else "C1",
        alpha=0.6,
      )
  axes[1].plot([], [], color="C0", label="best PBT schedule")
  axes[1].plot([], [], color="C1", label="best random-search static")
  axes[1].set_title("replay from scratch (fresh seeds)", fontsize=9)
  axes[1].set_xlabel("GAN steps")
  axes[1].set_yscale("log")
  axes[1].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=70)
  plt.close(fig)


def table(data: dict) -> str:
  """Markdown: best FID per method (mean ± std over seeds, every seed), best so far at
  quarters of the budget, and the replay comparison."""
  from experiments import stats

  lines = [
    "| method | seeds | best FID | best so far at 25% / 50% / 75% of the trials | CPU s |",
    "|---|---|---|---|---|",
  ]
  for method in METHODS:
    runs = [r for r in data["runs"] if r["method"] == method]
    if not runs:
      continue
    curves = [_best_so_far(r) for r in runs]
    q = [
      stats.fmt_mean_sd([c[max(0, int(len(c) * f) - 1)] for c in curves], 1)
      for f in (0.25, 0.5, 0.75)
    ]
    lines.append(
      f"| {method} | {','.join(str(r['seed']) for r in runs)} | "
      f"{stats.fmt_values([r['best_fid'] for r in runs])} | {' / '.join(q)} | "
      f"{sum(r['cpu_s'] for r in runs):.0f} |"
    )
  reps = data.get("replays", [])
  if reps:
    lines += [
      "",
      "| replay from scratch | study seeds | final FID (every replay) | "
      "best FID along the replay |",
      "|---|---|---|---|",
    ]
    for name in ("pbt_schedule", "rs_static"):
      finals, bests = [], []
      for rep in reps:
        for key, val in rep.items():
          if key.startswith(name + "/"):
            finals.append(val["fids"][-1])
            bests.append(min(val["fids"]))
      lines.append(
        f"| {name} | {','.join(str(r['seed']) for r in reps)} | "
        f"{stats.fmt_values(finals)} | {stats.fmt_values(bests)} |"
      )
  return "\n".join(lines)


def readme_table_v0() -> str:
  """The README block ``pbt_vs_rs_v0``: the earlier exploratory study's tables."""
  return table(json.loads((ROOT / "results" / "pbt_vs_rs.json").read_text()))


def readme_table_v0_trials100() -> str:
  """The README block ``pbt_vs_rs_v0_trials100``: its 100-step-trial run (seed 0)."""
  return table(json.loads((ROOT / "results" / "trials100" / "pbt_vs_rs.json").read_text()))


def readme_table_v1() -> str:
  """The README block ``pbt_vs_rs_v1``: the study's table and its registered endpoints."""
  from experiments import _report
  from experiments.pbt import pbt_vs_rs_v1 as v1

  found = ["the **Verdict** above", *["above (**Secondary**)"] * 3]
  found.append("the figure `experiments/pbt/results/pbt_vs_rs_v1.png`")
  record = json.loads(v1.RESULTS_V1.read_text()).get("registration")
  protocol = v1.PROTOCOL_V1.relative_to(ROOT.parent.parent).as_posix()
  return "\n".join([v1.readme_table_v1(), *_report.endpoint_lines(protocol, found, record)])


def _register() -> None:
  from experiments import _report

  _report.register("pbt_vs_rs_v0", "experiments/pbt/README.md", f"{__name__}:readme_table_v0")
  _report.register(
    "pbt_vs_rs_v0_trials100", "experiments/pbt/README.md", f"{__name__}:readme_table_v0_trials100"
  )
  _report.register("pbt_vs_rs_v1", "experiments/pbt/README.md", f"{__name__}:readme_table_v1")


_register()


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("study", choices=["pbt_vs_rs"])
  p.add_argument("--table", action="store_true", help="only print the tables of the JSON")
  p.add_argument("--seeds", default="0,1,2")
  p.add_argument("--population", type=int, default=4)
  p.add_argument("--trials", type=int, default=40, help="trials per run (lineages: /population)")
  p.add_argument("--steps-per-trial", type=int, default=100)
  p.add_argument("--batch-size", type=int, default=50)
  p.add_argument("--eval-samples", type=int, default=1000)
  p.add_argument("--replay-seeds", type=int, default=2, help="fresh seeds per replayed schedule")
  p.add_argument("--set", action="append", help="any config field: --set train_examples=2000")
  p.add_argument("--runs", default="runs/pbt_results")
  p.add_argument("--out", default=str(ROOT / "results"))
  return p.parse_args(argv)


def main(argv=None) -> None:
  args = parse_args(argv)
  if args.table:
    print(table(json.loads((Path(args.out) / "pbt_vs_rs.json").read_text())))
    return
  from absl import logging

  logging.set_verbosity(logging.WARNING)
  data = run_study(args, log=lambda s: print(s, flush=True))
  print(table(data))


if __name__ == "__main__":
  main()
