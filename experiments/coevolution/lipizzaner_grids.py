r"""Issue-12 study 1: do larger Lipizzaner grids lower the class TVD of the best mixture
(RQ1) without mode collapse (RQ2)? Fashion-MNIST with Lipizzaner's MNIST protocol.

  nice python -m experiments.coevolution.lipizzaner_grids --grids 1,2,3 --seeds 0,1,2 \
      --generations 30 [--steps 600] [--control]       # run (or resume) the study
  python -m experiments.coevolution.lipizzaner_grids --table

Every run is ``configs/fashion_mnist_3x3.py`` with Lipizzaner's settings made explicit:
the MLP pair, batch 100, ``steps`` batches per cell and generation (600 = a full epoch),
the generator on every batch and the discriminator on every second one against the
updated generator (``schedule="lipizzaner"``, ``d_every=2``), Adam 2e-4 (0.5, 0.999)
without Lookahead, learning-rate mutation, tournament 2 with one replacement, the
mixture (1+1)-ES (sigma 0.01) scored by classifier-FID. ``--control`` adds a 1x1 grid
with the largest grid's total number of steps per generation (same total compute).

Each (grid, seed) runs in ``<runs>/<n>x<n>_s<seed>`` (``train.train``: a killed run
resumes from its checkpoint, a finished one is skipped). Writes
``<out>/lipizzaner_grids.json`` (every run's best-mixture curves against generations and
seconds), ``<out>/lipizzaner_grids.png`` and ``<out>/lipizzaner_grids_samples.png`` (each
grid's final samples: :func:`samples_figure`). The tables and README blocks are in
``lipizzaner_tables.py`` (their names are importable from here too).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from experiments.coevolution.lipizzaner_tables import COLLAPSE_TVD as COLLAPSE_TVD
from experiments.coevolution.lipizzaner_tables import METRICS, ROOT, groups, table
from experiments.coevolution.lipizzaner_tables import readme_table as readme_table
from experiments.coevolution.lipizzaner_tables import readme_table_v0 as readme_table_v0
from experiments.coevolution.lipizzaner_tables import readme_table_v1 as readme_table_v1
from experiments.coevolution.lipizzaner_tables import readme_table_v2 as readme_table_v2


def run_config(args, n: int, seed: int, steps: int):
  from experiments.coevolution.configs import fashion_mnist_3x3

  c = fashion_mnist_3x3.get_config()
  if "schedule" not in c:
    raise SystemExit("this study needs the coevolution config field 'schedule' (issue 11)")
  c.rows = c.cols = n
  c.seed = seed
  c.lookahead = False
  c.schedule, c.d_every = "lipizzaner", 2
  c.learning_rate, c.b1, c.b2, c.batch_size = 2e-4, 0.5, 0.999, 100
  c.tournament_size, c.n_replacements, c.mixture_sigma = 2, 1, 0.01
  c.steps_per_generation = steps
  c.generations = args.generations
  c.eval_every = c.checkpoint_every = args.eval_every
  c.plot_every = 0
  c.tensorboard = c.progress = False
  for item in args.set or ():  # "field=json value" or "field=text", dotted fields allowed
    name, value = item.split("=", 1)
    *parents, leaf = name.split(".")
    node = c
    for part in parents:
      node = node[part]
    node[leaf] = value if isinstance(node[leaf], str) else type(node[leaf])(json.loads(value))
  return c


def run_one(config, workdir: Path, log=print) -> dict:
  from experiments import _classifier_cache
  from experiments.coevolution import train
  from minmaxlab import runner

  workdir = Path(workdir)
  if not (workdir / "summary.json").exists():
    t0 = time.process_time()
    train.train(config, workdir, resume=(workdir / "checkpoints").exists())
    cpu = time.process_time() - t0
    (workdir / "cpu_s.json").write_text(json.dumps(cpu))  # of the last (resumed) segment
    # which evaluation classifier scored the run (FIDs compare only under the same one)
    scorer = _classifier_cache.cached_identity(config.dataset, config.classifier.cache_dir or None)
    (workdir / "classifier.json").write_text(json.dumps(scorer))
  rows = runner.read_jsonl(workdir / "metrics.jsonl")
  wall = np.cumsum([r.get("seconds", 0.0) for r in rows])
  curves = [
    {
      "generation": r.get("generation", r.get("step")),
      "seconds": float(s),
      **{k: r[f"mixture/{k}"] for k in METRICS},
    }
    for r, s in zip(rows, wall)
    if "mixture/fid" in r
  ]
  cpu_file, scorer_file = workdir / "cpu_s.json", workdir / "classifier.json"
  log(f"{workdir.name}: final " + ", ".join(f"{k} {curves[-1][k]:.3f}" for k in METRICS))
  return {
    "rows": config.rows,
    "steps_per_generation": config.steps_per_generation,
    "seed": config.seed,
    "curves": curves,
    "cpu_s_last_segment": json.loads(cpu_file.read_text()) if cpu_file.exists() else None,
    "final_weights": rows[-1].get("mixture/weights"),
    "classifier": json.loads(scorer_file.read_text()) if scorer_file.exists() else None,
  }


def protocol_jobs(args) -> tuple[dict, list[tuple[str, int, int, dict]]]:
  """The protocol file ``args.protocol`` and its runs: ``(arm, rows, steps, coupling
  fields)`` per arm (``--grids`` may pick a subset of its arms by name)."""
  from experiments import _report

  protocol = _report.load_protocol(args.protocol)
  names = list(protocol["arms"]) if not args.arms else args.arms.split(",")
  unknown = [a for a in names if a not in protocol["arms"]]
  if unknown:
    raise SystemExit(f"--arms: {', '.join(unknown)} not in {', '.join(protocol['arms'])}")
  jobs = []
  for name in names:
    arm = protocol["arms"][name]
    coupling = {k: v for k, v in protocol["couplings"][arm["coupling"]].items() if k != "note"}
    jobs.append((name, arm["rows"], arm["steps_per_generation"], coupling))
  return protocol, jobs


def run_study(args, log=print) -> dict:
  from experiments import registration

  registered = reg = None
  if args.protocol:  # refused unless the protocol and the code are committed (or --trial)
    reg = registration.start(args.protocol, trial=args.trial)
    registered, jobs = protocol_jobs(args)
    s = registered["settings"]
    args.generations = args.generations or s["generations"]
    args.eval_every = args.eval_every or s["eval_every"]
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else registered["seeds"]
    if args.steps is not None:  # a smaller budget (tests): every arm's steps scaled alike
      base = min(steps for _, _, steps, _ in jobs)
      jobs = [(a, n, steps * args.steps // base, c) for a, n, steps, c in jobs]
  else:
    grids = [int(g) for g in (args.grids or "1,2,3").split(",")]
    seeds = [int(s) for s in (args.seeds or "0,1,2").split(",")]
    args.generations, args.eval_every = args.generations or 30, args.eval_every or 5
    args.steps = 600 if args.steps is None else args.steps
    jobs = [] if args.control_only else [(f"{n}x{n}", n, args.steps, {}) for n in grids]
    if args.control or args.control_only:
      big = max(grids)
      jobs.append((f"1x1_x{big * big}", 1, args.steps * big * big, {}))
  out_dir = Path(args.out)
  out_dir.mkdir(parents=True, exist_ok=True)
  path = out_dir / "lipizzaner_grids.json"
  data = {"protocol": None, "runs": []}
  if registered and path.exists():  # parallel processes of one protocol share the JSON
    data = json.loads(path.read_text())
  if reg:
    data["registration"] = registration.merge(data.get("registration"), reg)
  for seed in seeds:  # seed-major: a stopped study has every grid at the same seeds
    for name, n, steps, coupling in jobs:
      config = run_config(args, n, seed, steps)
      for k, v in coupling.items():
        config[k] = v
      if registered:
        config.fitness_samples = registered["settings"]["fitness_samples"]
        config.mixture_samples = registered["settings"]["mixture_samples_per_generator"]
        config.num_eval_samples = registered["settings"]["num_eval_samples"]
      if data["protocol"] is None:
        protocol = {k: v for k, v in config.to_dict().items() if k not in ("rows", "cols", "seed")}
        if registered:
          protocol.update(registered=registered, overrides=list(args.set or ()))
        data["protocol"] = json.loads(json.dumps(protocol))  # tuples as JSON lists
      r = run_one(config, Path(args.runs) / f"{name}_s{seed}", log)
      _merge_run(path, data, {"grid": name, **r}, registered)
  if not registered:
    samples_figure(Path(args.runs), out_dir)
  return json.loads(path.read_text())


def _merge_run(path: Path, data: dict, run: dict, registered) -> None:
  """Add ``run`` to ``path`` (replacing the same grid and seed), under a lock: several
  processes may run different seeds of one protocol."""
  from experiments import _report, registration

  with _report.results_lock(path):
    if registered and path.exists():
      mine = data.get("registration")
      data.update(json.loads(path.read_text()))
      if mine:  # another process's commits kept beside this one's
        data["registration"] = registration.merge(data.get("registration"), mine)
    runs = [r for r in data["runs"] if (r["grid"], r["seed"]) != (run["grid"], run["seed"])]
    order = list(registered["arms"]) if registered else []
    runs.append(run)
    if order:
      runs.sort(key=lambda r: (order.index(r["grid"]) if r["grid"] in order else 99, r["seed"]))
    data["runs"] = runs
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":")))
    tmp.replace(path)
    plot(data, path.with_suffix(".png"))


def samples_figure(runs_dir: Path, out_dir: Path) -> Path | None:
  """``<out>/lipizzaner_grids_samples.png``: one panel per grid (and control), the best
  mixture's samples at the last evaluated generation of the highest seed whose run folder
  holds them (``<runs>/<grid>_s<seed>/samples/mixture_gen_<g>.png``); ``None`` when no
  run folder has any."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  gen = lambda p: int(p.stem.rsplit("_", 1)[1])
  found: dict = {}
  for d in Path(runs_dir).glob("*_s*"):
    grid, _, seed = d.name.rpartition("_s")
    images = sorted(d.glob("samples/mixture_gen_*.png"), key=gen)
    if seed.isdigit() and images and int(seed) >= found.get(grid, (-1,))[0]:
      found[grid] = (int(seed), images[-1])
  if not found:
    return None
  order = sorted(found, key=lambda g: (g.startswith("1x1_x"), g))  # grids, then controls
  fig, axes = plt.subplots(1, len(order), figsize=(2.6 * len(order), 2.9), squeeze=False)
  for ax, grid in zip(axes[0], order):
    seed, image = found[grid]
    ax.imshow(plt.imread(image), cmap="gray")
    ax.set_title(f"{grid}, seed {seed}\ngeneration {gen(image)}", fontsize=8)
    ax.axis("off")
  fig.suptitle("best mixture's samples", fontsize=9)
  fig.tight_layout()
  path = Path(out_dir) / "lipizzaner_grids_samples.png"
  fig.savefig(path, dpi=64)  # about 150 KB for four 28x28-image grids
  plt.close(fig)
  return path


def merge(src: Path, out_dir: Path) -> dict:
  """Merge the runs of ``src`` (a ``lipizzaner_grids.json``) into
  ``<out_dir>/lipizzaner_grids.json``: a (grid, seed) of ``src`` replaces the same one
  there, the rest are kept; rows stay grouped by grid. Rewrites the JSON atomically and
  redraws the figure."""
  path = out_dir / "lipizzaner_grids.json"
  new = json.loads(src.read_text())
  data = (
    json.loads(path.read_text()) if path.exists() else {"protocol": new["protocol"], "runs": []}
  )
  # fields added to the config since are not a different protocol; each run keeps its steps
  common = (set(data["protocol"]) & set(new["protocol"])) - {"steps_per_generation"}
  differs = sorted(k for k in common if data["protocol"][k] != new["protocol"][k])
  if differs:
    raise SystemExit(f"--merge: {src} has another protocol (fields {', '.join(differs)})")
  if data["runs"] and bool(data.get("registration")) != bool(new.get("registration")):
    raise SystemExit(f"--merge: only one of {src} and {path} has a registration record")
  if new.get("registration"):
    from experiments import registration

    data["registration"] = registration.merge(data.get("registration"), new["registration"])
  runs = {(r["grid"], r["seed"]): r for r in data["runs"]}
  runs.update({(r["grid"], r["seed"]): r for r in new["runs"]})
  order = list(dict.fromkeys(r["grid"] for r in data["runs"] + new["runs"]))
  data["runs"] = sorted(runs.values(), key=lambda r: (order.index(r["grid"]), r["seed"]))
  tmp = path.with_suffix(".tmp")
  tmp.write_text(json.dumps(data, separators=(",", ":")))
  tmp.replace(path)
  plot(data, out_dir / "lipizzaner_grids.png")
  return data


def plot(data: dict, path: Path) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
  for i, (grid, runs) in enumerate(groups(data).items()):
    n = min(len(r["curves"]) for r in runs)
    if n == 0:
      continue
    gen = np.array([c["generation"] for c in runs[0]["curves"][:n]])
    for ax, key in zip(axes[:2], ("class_tvd", "fid")):
      y = np.array([[c[key] for c in r["curves"][:n]] for r in runs])
      ax.plot(gen, y.mean(0), color=f"C{i}", label=f"{grid} ({len(runs)} seeds)")
      ax.fill_between(gen, y.min(0), y.max(0), color=f"C{i}", alpha=0.15)
      ax.set_title(f"best mixture: {key} (mean, band min..max)", fontsize=9)
      ax.set_xlabel("generation")
    for r in runs:
      axes[2].plot(
        [c["seconds"] for c in r["curves"]],
        [c["class_tvd"] for c in r["curves"]],
        color=f"C{i}",
        alpha=0.6,
      )
  axes[2].set_title("class TVD vs wall seconds of training", fontsize=9)
  axes[2].set_xlabel("seconds")
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=70)
  plt.close(fig)


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--table", action="store_true", help="only print the table of the JSON")
  p.add_argument(
    "--protocol", help="a protocol file (protocols/lipizzaner_grids.v<N>.json): arms, seeds"
  )
  p.add_argument("--trial", action="store_true", help="a smoke run: registration not checked")
  p.add_argument("--arms", help="with --protocol: a subset of its arms")
  p.add_argument("--grids", help="without --protocol (version 0): grid sizes, default 1,2,3")
  p.add_argument("--seeds", help="default: the protocol's (version 0: 0,1,2)")
  p.add_argument("--generations", type=int, help="default: the protocol's (version 0: 30)")
  p.add_argument("--eval-every", type=int, help="default: the protocol's (version 0: 5)")
  p.add_argument(
    "--steps",
    type=int,
    help="batches per cell and generation (version 0: 600); with --protocol, the smallest "
    "arm's steps, the others scaled alike (tests)",
  )
  p.add_argument("--control", action="store_true", help="add the same-total-compute 1x1 run")
  p.add_argument(
    "--control-only", action="store_true", help="only the control of the largest grid in --grids"
  )
  p.add_argument(
    "--merge",
    metavar="JSON",
    help="merge another run's lipizzaner_grids.json into <out>'s (a (grid, seed) there "
    "replaces the same one here), redraw the figure, print the table",
  )
  p.add_argument(
    "--samples",
    action="store_true",
    help="only draw <out>/lipizzaner_grids_samples.png from the run folders in --runs",
  )
  p.add_argument("--set", action="append", help="any config field: --set fitness_samples=500")
  p.add_argument("--runs", default="runs/coev_lipizzaner_grids")
  p.add_argument("--out", default=str(ROOT / "results"))
  return p.parse_args(argv)


def main(argv=None) -> None:
  args = parse_args(argv)
  if args.table:
    print(table(json.loads((Path(args.out) / "lipizzaner_grids.json").read_text())))
    return
  if args.samples:
    print(samples_figure(Path(args.runs), Path(args.out)) or f"no samples in {args.runs}")
    return
  if args.merge:
    print(table(merge(Path(args.merge), Path(args.out))))
    return
  from absl import logging

  logging.set_verbosity(logging.WARNING)
  print(table(run_study(args, log=lambda s: print(s, flush=True))))


if __name__ == "__main__":
  main()
