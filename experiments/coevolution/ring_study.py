r"""Issue 34c, the ring: the reference's coupling vs tournament selection vs a plain GAN.

  nohup nice -n 10 python -m experiments.coevolution.ring_study run > runs/ring_v1.log 2>&1 &
  python -m experiments.coevolution.ring_study run        # again: resumes, finished runs kept
  python -m experiments.coevolution.ring_study report     # the README blocks, rewritten
  python -m experiments.coevolution.ring_study figure
  nohup nice -n 10 python -m experiments.coevolution.ring_study run \
      --protocol experiments/coevolution/protocols/ring.v2.json > runs/ring_v2.log 2>&1 &
      # protocols/ring.v2.json (issue 33): the reference coupling with the reference's
      # learning-rate mutation as run, beside ring.v1's reference arm and plain GAN run again
  nohup nice -n 10 python -m experiments.coevolution.ring_study run \
      --protocol experiments/coevolution/protocols/ring.v3.json > runs/ring_v3.log 2>&1 &
      # protocols/ring.v3.json (issue 45): the reference's coupling, whole (plain Adam, the
      # reference's sequential schedule and quirks), beside the plain GAN run again

The arms, seeds and settings come from the pre-registered protocol (``protocols/ring.v1.json``
by default): ``configs/ring8_3x3.py``, then the protocol's ``common`` fields, then the arm's
``overrides``. The study runner (``experiments.study``: :data:`STUDY`) runs every (arm, seed)
missing from ``results/ring_v<version>.json``, arm by arm for ring.v1 (each arm's programs
compile once and serve all its seeds), seed by seed where the protocol has a ``run_order``;
:func:`run_one` is ``train.train`` in ``runs/ring_v<version>/<arm>_s<seed>`` (a killed run
resumes from its checkpoint, a finished one is read back, not rerun), and its record (final
metrics, curves every ``eval_every`` generations, per-cell mode counts, the operators it ran
with, wall and CPU seconds) is added to the JSON at once.

The README's blocks ``ring_v1``-``ring_v3`` (every seed, the Holm-corrected verdicts) and
``ring_issue18*`` (the earlier exploratory study of issue 18, from
``results/issue18_ring8_study.json``) are generated from the committed JSON by
``ring_tables.py`` and ``ring_issue18.py``.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

from experiments import registration, study
from experiments.coevolution import ring_issue18, ring_tables
from experiments.coevolution.ring_tables import (
  FIGURE,
  REPO,
  RESULTS,
  arm_name,
  arm_values,
  load_protocol,
)

# The fields of each run's config.json copied into the results: what the run really ran.
OPERATOR_FIELDS = (
  "rows",
  "cols",
  "steps_per_generation",
  "generations",
  "selection",
  "opponents",
  "generator_selection",
  "tournament_size",
  "n_replacements",
  "lr_mutation",
  "mutation_probability",
  "mutation_scale",
  "mixture_sigma",
  "mixture_sampling",
  "learning_rate",
  "lookahead",
)
FINAL_KEYS = (
  "mixture/modes_covered",
  "mixture/high_quality_rate",
  "mixture/mode_kl",
  "mixture/weights",
  "grid/modes_covered",
  "grid/high_quality_rate",
  "cells/modes_covered",
  "best_cell",
)


def arm_config(protocol: dict, arm: str, seed: int):
  """The ``ml_collections`` config of ``arm`` and ``seed``: ``configs/ring8_3x3.py``,
  the protocol's ``common`` fields, then the arm's ``overrides``."""
  from experiments.coevolution.configs import ring8_3x3

  c = ring8_3x3.get_config()
  for k, v in {**protocol["common"], **protocol["arms"][arm]["overrides"]}.items():
    c[k] = v  # "opponents" is not a ring8_3x3 field: added (the library's default is "auto")
  c.seed = seed
  return c


def _git_commit() -> str:
  """HEAD, short (``""`` where git cannot say)."""
  try:
    return registration.git(REPO, "rev-parse", "--short", "HEAD")
  except registration.Refused:
    return ""


def _round(x, digits: int):
  return None if x is None else round(x, digits)


def read_run(workdir: Path, arm: str, seed: int) -> dict | None:
  """One finished run folder as a results record (``None`` when unfinished)."""
  from minmaxlab import runner

  if not (workdir / "summary.json").exists():
    return None
  rows = runner.read_jsonl(workdir / "metrics.jsonl")
  summary = json.loads((workdir / "summary.json").read_text())
  cfg = json.loads((workdir / "config.json").read_text())
  timing = {}
  if (workdir / "timing.json").exists():
    timing = json.loads((workdir / "timing.json").read_text())
  last = rows[-1]
  curve = [
    {
      "generation": r["generation"],
      "modes": r["mixture/modes_covered"],
      "hq": round(r["mixture/high_quality_rate"], 4),
    }
    for r in rows
    if "mixture/modes_covered" in r
  ]
  return {
    "arm": arm,
    "seed": seed,
    "generations": summary["generations"],
    **{k: last[k] for k in FINAL_KEYS if k in last},
    "curve": curve,
    "replaced_g": sum(r.get("replaced_g", 0) for r in rows),
    "replaced_d": sum(r.get("replaced_d", 0) for r in rows),
    "diverged": sum(r.get("diverged", 0) for r in rows),
    "operators": {k: cfg.get(k) for k in OPERATOR_FIELDS},
    "wall_seconds": round(timing.get("wall_seconds", summary["wall_seconds"]), 1),
    "cpu_seconds": None if "cpu_seconds" not in timing else round(timing["cpu_seconds"], 1),
    "resumed": timing.get("resumed", False),
    "commit": timing.get("commit"),
    "first_generation_seconds": _round(summary["first_generation_seconds"], 2),
    "median_generation_seconds": _round(summary["median_generation_seconds"], 3),
  }


def _relative(path) -> str:
  path = Path(path).resolve()
  return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


_head = functools.cache(_git_commit)  # the code this process imports, for every run


def run_one(ctx, arm: str, seed: int) -> dict:
  """One run of the protocol (``train.train`` in ``<runs>/<arm>_s<seed>``; a finished run
  folder is read back, not rerun); its record (:func:`read_run`)."""
  from experiments.coevolution import results as results_lib
  from experiments.coevolution import train

  workdir = ctx.runs / f"{arm}_s{seed}"
  overrides = {**ctx.protocol["common"], **ctx.protocol["arms"][arm]["overrides"], "seed": seed}
  flags = " ".join(f"--config.{k}={v}" for k, v in results_lib.flat_overrides(overrides).items())
  ctx.log(
    "$ python -m experiments.coevolution.main --config "
    f"experiments/coevolution/configs/ring8_3x3.py --workdir {workdir} {flags}"
  )
  if (workdir / "summary.json").exists():
    ctx.log("  (finished before: kept)")
    return read_run(workdir, arm, seed)
  resumed = (workdir / "checkpoints").exists()
  t0, c0 = time.perf_counter(), time.process_time()
  row = train.train(arm_config(ctx.protocol, arm, seed), workdir, resume=resumed)
  timing = {
    "wall_seconds": time.perf_counter() - t0,
    "cpu_seconds": time.process_time() - c0,
    "resumed": resumed,
    "load_average": os.getloadavg(),
    "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "commit": _head(),  # HEAD when the study process started
  }
  (workdir / "timing.json").write_text(json.dumps(timing))
  ctx.log(
    f"  {arm} seed {seed}: modes {row['mixture/modes_covered']}, HQ "
    f"{row['mixture/high_quality_rate']:.3f}, pooled {row.get('grid/modes_covered')} / "
    f"{row.get('grid/high_quality_rate', float('nan')):.3f}; wall "
    f"{timing['wall_seconds']:.0f} s, CPU {timing['cpu_seconds']:.0f} s"
  )
  return read_run(workdir, arm, seed)


def _header(ctx, runs: list) -> dict:
  """The fields of the results JSON beside its runs."""
  import jax

  from minmaxlab import runner

  return {
    "study": ctx.protocol["study"],
    "version": ctx.protocol["version"],
    "protocol": _relative(ctx.protocol_path),
    "registered": ctx.protocol.get("registered"),  # typed in old protocols; git: "registration"
    "classifier": None,
    "host": {"cpu": runner.cpu_model(), "cpus": os.cpu_count(), "jax": jax.__version__},
    # the commits the runs started from (HEAD of the study process); HEAD now if unrecorded
    "commit": ", ".join(sorted({r["commit"] for r in runs if r.get("commit")})) or _git_commit(),
  }


def figure(protocol=None, data=None, path=FIGURE) -> Path:
  """Per-seed modes and HQ of every arm at generation 40 (filled: the final mixture;
  open: every cell pooled), the means as bars."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import numpy as np

  protocol = protocol or load_protocol()
  data = data or json.loads(RESULTS.read_text())
  arms = list(protocol["arms"])
  fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.4), dpi=100)
  rng = np.random.default_rng(0)
  for ax, (key, pooled, title) in zip(
    axes,
    (
      ("mixture/modes_covered", "grid/modes_covered", "modes covered (of 8)"),
      ("mixture/high_quality_rate", "grid/high_quality_rate", "high-quality rate"),
    ),
  ):
    for i, a in enumerate(arms):
      v = np.array(arm_values(data["runs"], a, key))
      p = np.array(arm_values(data["runs"], a, pooled))
      if v.size == 0:
        continue
      jit = rng.uniform(-0.12, 0.12, v.size)
      ax.bar(i, v.mean(), width=0.6, color=f"C{i}", alpha=0.25)
      ax.scatter(i - 0.15 + jit, v, color=f"C{i}", s=22, label="final mixture" if i == 0 else None)
      ax.scatter(
        i + 0.15 + jit,
        p,
        facecolors="none",
        edgecolors=f"C{i}",
        s=22,
        label="cells pooled" if i == 0 else None,
      )
    ax.set_xticks(range(len(arms)), [arm_name(protocol, a) for a in arms], fontsize=8)
    ax.set_title(title, fontsize=10)
    if key.endswith("modes_covered"):
      ax.set_ylim(0, 8.5)
    else:
      ax.set_ylim(0, 1.02)
  axes[0].legend(fontsize=7, loc="upper right")
  n = {a: len(arm_values(data["runs"], a, "mixture/modes_covered")) for a in arms}
  fig.suptitle(
    f"ring8_3x3, generation 40, seeds per arm: {', '.join(str(n[a]) for a in arms)}", fontsize=9
  )
  fig.tight_layout()
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path)
  plt.close(fig)
  return path


def _figure(o) -> None:
  protocol = load_protocol(o.protocol)
  out, _ = study.where(STUDY, o, protocol)
  print(figure(protocol, json.loads(out.read_text()), out.with_suffix(".png")))


# Every README block of the study and the earlier issue-18 study, in README order.
BLOCKS = {**ring_tables.BLOCKS, **ring_issue18.BLOCKS}
STUDY = study.Study(
  protocol=ring_tables.PROTOCOL,
  results=REPO / "experiments" / "coevolution" / "results" / "ring_v{version}.json",
  run_one=run_one,
  runs=str(REPO / "runs" / "ring_v{version}"),
  blocks=tuple(BLOCKS),
  order=lambda protocol: "seed" if protocol.get("run_order") else "arm",
  header=_header,
  sort_key=lambda p, r: (list(p["arms"]).index(r["arm"]), p["seeds"].index(r["seed"])),
  commands=(("figure", _figure),),
)


def main(argv=None) -> int:
  return study.main(STUDY, argv)


if __name__ == "__main__":
  raise SystemExit(main())
