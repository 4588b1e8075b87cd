r"""Issue-12 study 1: do larger Lipizzaner grids lower the class TVD of the best mixture
(RQ1) without mode collapse (RQ2)? Fashion-MNIST with Lipizzaner's MNIST protocol; pre-registered
from version 1 (``protocols/lipizzaner_grids.v<N>.json``; the bfloat16 parity study's protocols
run here too), on the study runner (``experiments.study``: :data:`STUDY`).

  nice python -m experiments.coevolution.lipizzaner_grids run --protocol PROTOCOL --out DIR
  python -m experiments.coevolution.lipizzaner_grids table --out DIR
  python -m experiments.coevolution.lipizzaner_grids samples --runs RUNS --out DIR
  python -m experiments.coevolution.lipizzaner_grids merge --from JSON --out DIR

Every run is ``configs/fashion_mnist_3x3.py`` with Lipizzaner's settings made explicit
(:func:`run_config`): the MLP pair, batch 100, the arm's batches per cell and generation, the
generator on every batch and the discriminator on every second one against the updated
generator (``schedule="lipizzaner"``, ``d_every=2``), Adam 2e-4 (0.5, 0.999) without
Lookahead, the mixture (1+1)-ES (sigma 0.01) scored by classifier-FID; then the arm's
coupling fields and the protocol's sample sizes.

Each (arm, seed) runs in ``<runs>/<arm>_s<seed>`` (``train.train``: a killed run resumes from
its checkpoint, a finished one is read back), seed-major, into ``<out>/lipizzaner_grids.json``
(every run's best-mixture curves against generations and seconds) and its figure
``lipizzaner_grids.png``; ``samples`` draws ``lipizzaner_grids_samples.png`` (each arm's final
samples: :func:`samples_figure`). The tables and README blocks are in ``lipizzaner_tables.py``.
Version 0 (exploratory, not pre-registered) ran this file's command before the runner, with
``--grids`` and ``--control`` (commits up to ``d8cb216``); its JSON and blocks stay.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from experiments import study
from experiments.coevolution.lipizzaner_tables import METRICS, ROOT, groups, table


def run_config(args, n: int, seed: int, steps: int, fields: dict):
  """The config of one run: Lipizzaner's settings, ``args``' ``generations`` and
  ``eval_every``, then ``fields``, then ``args.set`` (``field=value`` items)."""
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
  for k, v in fields.items():
    c[k] = v
  for item in args.set or ():  # "field=json value" or "field=text", dotted fields allowed
    name, value = item.split("=", 1)
    *parents, leaf = name.split(".")
    node = c
    for part in parents:
      node = node[part]
    node[leaf] = value if isinstance(node[leaf], str) else type(node[leaf])(json.loads(value))
  return c


def train_run(config, workdir: Path, log=print) -> dict:
  """Train (or resume, or read back) one run in ``workdir``; its record."""
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


def _config(ctx, arm: str, seed: int):
  """The config of ``arm`` and ``seed``: the protocol's settings and the arm's coupling
  fields (a command-line ``--generations``/``--eval-every``/``--set`` over them; ``--steps``:
  the smallest arm's batches per generation, every arm scaled alike)."""
  from types import SimpleNamespace

  p, o = ctx.protocol, ctx.options
  s, spec = p["settings"], p["arms"][arm]
  steps = spec["steps_per_generation"]
  if o.steps is not None:  # a smaller budget (tests)
    steps = steps * o.steps // min(a["steps_per_generation"] for a in p["arms"].values())
  gens, every = o.generations or s["generations"], o.eval_every or s["eval_every"]
  args = SimpleNamespace(generations=gens, eval_every=every, set=o.set)
  fields = {k: v for k, v in p["couplings"][spec["coupling"]].items() if k != "note"}
  fields.update(fitness_samples=s["fitness_samples"], num_eval_samples=s["num_eval_samples"])
  fields["mixture_samples"] = s["mixture_samples_per_generator"]
  return run_config(args, spec["rows"], seed, steps, fields)


def run_one(ctx, arm: str, seed: int) -> dict:
  """One (arm, seed) of the protocol: :func:`train_run` in ``<runs>/<arm>_s<seed>``."""
  return {"grid": arm, **train_run(_config(ctx, arm, seed), ctx.runs / f"{arm}_s{seed}", ctx.log)}


def _header(ctx, runs: list) -> dict:
  """The JSON's ``protocol`` record: the first arm's config, the protocol, the ``--set``s."""
  config = _config(ctx, next(iter(ctx.protocol["arms"])), ctx.protocol["seeds"][0])
  protocol = {k: v for k, v in config.to_dict().items() if k not in ("rows", "cols", "seed")}
  protocol.update(registered=ctx.protocol, overrides=list(ctx.options.set or ()))
  return {"protocol": json.loads(json.dumps(protocol))}  # tuples as JSON lists


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
    raise SystemExit(f"merge --from {src}: another protocol (fields {', '.join(differs)})")
  if data["runs"] and bool(data.get("registration")) != bool(new.get("registration")):
    raise SystemExit(f"merge --from {src}: only it or {path} has a registration record")
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


def _options(p) -> None:
  p.add_argument("--generations", type=int, help="default: the protocol's")
  p.add_argument("--eval-every", type=int, help="default: the protocol's")
  p.add_argument("--steps", type=int, help="the smallest arm's batches per generation (tests)")
  p.add_argument("--set", action="append", help="any config field: --set fitness_samples=500")
  p.add_argument("--from", dest="source", help="merge: another lipizzaner_grids.json")


def _folder(o) -> Path:
  """The results folder of the command line ``o`` (``--out``, or its JSON file's folder)."""
  out = Path(o.out or ROOT / "results")
  return out.parent if out.suffix == ".json" else out


def _table(o) -> None:
  print(table(json.loads((_folder(o) / "lipizzaner_grids.json").read_text())))


STUDY = study.Study(
  protocol=ROOT / "protocols" / "lipizzaner_grids.v2.json",
  results=ROOT / "results" / "v{version}" / "lipizzaner_grids.json",
  run_one=run_one,
  runs="runs/grids_v{version}",
  blocks=("lipizzaner_grids_v2", "lipizzaner_grids_v1", "lipizzaner_grids_v0"),
  header=_header,
  arm_key="grid",
  sort_key=lambda p, r: (list(p["arms"]).index(r["grid"]), r["seed"]),
  saved=lambda ctx, out: plot(json.loads(out.read_text()), out.with_suffix(".png")),
  options=_options,
  commands=(
    ("table", _table),
    ("samples", lambda o: print(samples_figure(Path(o.runs or "runs"), _folder(o)))),
    ("merge", lambda o: print(table(merge(Path(o.source), _folder(o))))),
  ),
)


def main(argv=None) -> int:
  return study.main(STUDY, argv)


if __name__ == "__main__":
  raise SystemExit(main())
