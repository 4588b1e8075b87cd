r"""PBT vs random search with the same trials and steps on the 8-Gaussian ring.

  python -m experiments.pbt.compare --config experiments/pbt/configs/ring8.py \
      --workdir runs/compare --repetitions 3 --workers 0

Random search is the same controller with ``exploit="none"``: every member keeps
its initial hyperparameters and trains the same number of steps. Writes
``results.json``: per method and repetition, the best fitness and the best
fitness after every trial (fitness vs compute).
"""

import json
from pathlib import Path

import ml_collections
from absl import app, flags, logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a config file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of the runs and results.json.")
_REPETITIONS = flags.DEFINE_integer("repetitions", 3, "Seeds per method.")
_WORKERS = flags.DEFINE_integer("workers", 0, "Local worker processes (0: inline).")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  from experiments.pbt import train
  from minmaxlab import pbt

  out = {"config": _CONFIG.value.to_dict(), "runs": []}
  for seed in range(_REPETITIONS.value):
    for method in ("tournament", "none"):
      config = ml_collections.ConfigDict(_CONFIG.value.to_dict())
      config.seed, config.exploit = seed, method
      workdir = Path(_WORKDIR.value) / f"{method}_{seed}"
      s = train.train(config, workdir, workers=_WORKERS.value, log=lambda line: None)
      store = pbt.Store(workdir / "pbt.sqlite")  # the controller's store in its workdir
      curve, best = [], float("-inf")
      for t in sorted(store.trials(), key=lambda t: t.id):  # trial order = compute spent
        best = max(best, t.fitness)
        curve.append(best)
      store.close()
      out["runs"].append(
        {
          "method": "random_search" if method == "none" else "pbt",
          "seed": seed,
          "best_fitness": s["best_fitness"],
          "wall_seconds": s["wall_seconds"],
          "best_so_far": curve,
          "best_lineage": s["best_lineage"],
        }
      )
      print(
        f"{method:10s} seed {seed}: best fitness {s['best_fitness']:.3f} "
        f"({s['wall_seconds']:.0f} s)",
        flush=True,
      )
  Path(_WORKDIR.value, "results.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
  app.run(main)
