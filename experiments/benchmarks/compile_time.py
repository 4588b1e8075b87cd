"""Compile seconds of the coevolution programs per config (one JSON line).

For each config of ``experiments/coevolution/configs`` it builds the ``Coevolution`` that
``train.py`` builds and times, ahead of time, ``jax.jit(coev.step).lower(...)`` (tracing and
lowering to StableHLO) and ``.compile()`` (XLA) of the generation step, and the same for
``coev.init``. Image configs use abstract data of the real shapes (no data set and no
classifier are loaded: compile time depends on shapes only). The persistent compilation
cache is off, so every number is a cold compile.

  python -m experiments.benchmarks.compile_time [--configs smoke,ring8_3x3,fashion_mnist_3x3]
      [--repeats 1] [--set fashion_mnist_3x3.d_every=1 ...] [--first_generation]

``--first_generation`` adds the main job's time from start to its first generation, cold
(empty persistent cache) and warm (a rerun with a new workdir, and a resumed run), as
``first_generation`` in the JSON (``experiments/benchmarks/first_generation.py``: three
runs of the main job in subprocesses; wall and CPU seconds).

Load matters: compilation is mostly single-threaded, but other jobs on the same cores slow
it by their share; the JSON carries the load average before and after each config, the CPU
model and the process CPU seconds of each compile (robust to load).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_compilation_cache", False)

import jax.numpy as jnp  # noqa: E402

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.coevolution import experiment, train  # noqa: E402
from minmaxlab import coevolution as co  # noqa: E402
from minmaxlab import runner  # noqa: E402
from minmaxlab.gan import metrics, models  # noqa: E402


def _abstract_image_experiment(config):
  """The image config's ``Coevolution`` and abstract data (as ``train.build`` makes them,
  without loading the data set or the classifier)."""
  shape = (28, 28, 1)
  clf = metrics.cnn_classifier(shape, 10)
  params = jax.eval_shape(clf.init, jax.random.key(0))
  feature = clf.feature_dim
  data = train.ImageData(
    jax.ShapeDtypeStruct((60000,) + shape, jnp.float32),
    params,
    jax.ShapeDtypeStruct((feature,), jnp.float32),
    jax.ShapeDtypeStruct((feature, feature), jnp.float32),
  )
  pair = models.make_pair(
    config.architecture, shape, config.latent_dim or None, hidden=tuple(config.hidden)
  )
  from minmaxlab.gan import data as gan_data

  coev = co.Coevolution(
    train.coevolution_config(config),
    pair,
    sample_real=lambda d, k, n: gan_data.sample_batch(k, d.images, n),
    score_fn=metrics.fid_score(lambda d, x: clf.apply(d.classifier_params, x)[0]),
    scheme=experiment.scheme_from_config(config),
  )
  return coev, data


def time_config(name: str, overrides: dict) -> dict:
  config = importlib.import_module(f"experiments.coevolution.configs.{name}").get_config()
  for k, v in overrides.items():
    config[k] = type(config[k])(v) if not isinstance(config[k], bool) else v in ("1", "True")
  if config.dataset in train.MIXTURES:
    exp = train.build(config)
    coev, data = exp.coev, exp.data
  else:
    coev, data = _abstract_image_experiment(config)
  key = jax.random.key(0)
  load_before = list(os.getloadavg())
  out = {"load_average_before": load_before}
  state = None
  for what, fn, args in (("init", coev.init, (key,)), ("step", coev.step, None)):
    if args is None:
      args = (key, state, data)
    c0, t0 = time.process_time(), time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    c2, t2 = time.process_time(), time.perf_counter()
    out[what] = {
      "lower_s": round(t1 - t0, 2),
      "compile_s": round(t2 - t1, 2),
      "total_s": round(t2 - t0, 2),
      "cpu_s": round(c2 - c0, 2),
      "stablehlo_kib": round(len(lowered.as_text()) / 1024, 1),
      "hlo_kib": round(len(compiled.as_text()) / 1024, 1),
    }
    if what == "init":
      state = jax.eval_shape(fn, key)
  out["load_average_after"] = list(os.getloadavg())
  out["cell_strategy"] = coev.cell_strategy
  out["schedule"] = coev.config.schedule
  out["d_every"] = coev.config.d_every
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--configs", default="smoke,ring8_3x3,fashion_mnist_3x3")
  ap.add_argument("--repeats", type=int, default=1, help="cold compiles per config")
  ap.add_argument("--set", nargs="*", default=[], help="config.field=value overrides")
  ap.add_argument(
    "--first_generation",
    action="store_true",
    help="also time the main job to its first generation, cold and warm (minutes)",
  )
  args = ap.parse_args()
  result = {
    "benchmark": "compile_time",
    "machine": {
      "cpu_model": runner.cpu_model(),
      "cpus": os.cpu_count(),
      "jax": jax.__version__,
      "python": platform.python_version(),
    },
    "configs": {},
  }
  for name in args.configs.split(","):
    overrides = {}
    for item in args.set:
      target, _, value = item.partition("=")
      cfg, _, field = target.partition(".")
      if cfg == name:
        overrides[field] = value
    runs = []
    for _ in range(args.repeats):
      jax.clear_caches()
      runs.append(time_config(name, overrides))
      print(f"# {name}: {json.dumps(runs[-1])}", flush=True)
    result["configs"][name] = {
      "step_total_s": [r["step"]["total_s"] for r in runs],
      "step_cpu_s": [r["step"]["cpu_s"] for r in runs],
      "init_total_s": [r["init"]["total_s"] for r in runs],
      "runs": runs,
    }
  if args.first_generation:
    from experiments.benchmarks import first_generation

    result["first_generation"] = first_generation.measure(
      "experiments/coevolution/configs/ring8_3x3.py"
    )
    result["first_generation"]["load_average_after"] = list(os.getloadavg())
  print(json.dumps(result))


if __name__ == "__main__":
  main()
