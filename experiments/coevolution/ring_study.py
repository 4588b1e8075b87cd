r"""Issue 34c, the ring: the reference's coupling vs tournament selection vs a plain GAN.

  nohup nice -n 10 python -m experiments.coevolution.ring_study run > runs/ring_v1.log 2>&1 &
  python -m experiments.coevolution.ring_study resume       # the same: finished runs kept
  python -m experiments.coevolution.ring_study table [--write]   # the README block
  python -m experiments.coevolution.ring_study figure
  nohup nice -n 10 python -m experiments.coevolution.ring_study run --version 2 > runs/ring_v2.log &
      # protocols/ring.v2.json (issue 33): the reference coupling with the reference's
      # learning-rate mutation as run, beside ring.v1's reference arm and plain GAN run again

The arms, seeds and settings come from the pre-registered protocol
``protocols/ring.v1.json``: ``configs/ring8_3x3.py``, then the protocol's ``common``
fields, then the arm's ``overrides``. Every run is ``train.train`` in
``runs/ring_v1/<arm>_s<seed>`` (a killed run resumes from its checkpoint, a finished one
is read back, not rerun). The runs go arm by arm in one process, so each arm's programs
compile once and serve all its seeds. After every run ``results/ring_v1.json`` is
rewritten from the run folders (each run's final metrics, curves every ``eval_every``
generations, per-cell mode counts, the operators it ran with, wall and CPU seconds).

The README's blocks ``ring_v1`` (this study: every seed, the Holm-corrected verdicts) and
``ring_issue18*`` (the earlier exploratory study of issue 18, from
``results/issue18_ring8_study.json``) are generated here from the committed JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path

from experiments import _report

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PROTOCOL = HERE / "protocols" / "ring.v1.json"
RESULTS = HERE / "results" / "ring_v1.json"
FIGURE = HERE / "results" / "ring_v1.png"
ISSUE18 = HERE / "results" / "issue18_ring8_study.json"
RUNS = REPO / "runs" / "ring_v1"


def paths(version: int) -> dict:
  """Protocol, results JSON, figure and run folder of version ``version`` (1: the constants
  above; 2: issue 33's arm with the reference's learning-rate mutation as run)."""
  return {
    "protocol": HERE / "protocols" / f"ring.v{version}.json",
    "results": HERE / "results" / f"ring_v{version}.json",
    "figure": HERE / "results" / f"ring_v{version}.png",
    "runs": REPO / "runs" / f"ring_v{version}",
  }


README = "experiments/coevolution/README.md"
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


def load_protocol(path=PROTOCOL) -> dict:
  return _report.load_protocol(path)


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
  try:
    out = subprocess.run(
      ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    )
    return out.stdout.strip()
  except OSError:
    return ""


def _cpu_model() -> str:
  try:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor()


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


def collect(protocol: dict, runs_dir: Path = RUNS, protocol_path: Path = PROTOCOL) -> dict:
  """Every finished run of the protocol under ``runs_dir``, in protocol order."""
  import jax

  records = []
  for arm in protocol["arms"]:
    for seed in protocol["seeds"]:
      r = read_run(Path(runs_dir) / f"{arm}_s{seed}", arm, seed)
      if r is not None:
        records.append(r)
  return {
    "study": protocol["study"],
    "version": protocol["version"],
    "protocol": _relative(protocol_path),
    "registered": protocol["registered"],
    "classifier": None,
    "host": {"cpu": _cpu_model(), "cpus": os.cpu_count(), "jax": jax.__version__},
    # the commits the runs started from (HEAD of the study process); HEAD now if unrecorded
    "commit": ", ".join(sorted({r["commit"] for r in records if r.get("commit")})) or _git_commit(),
    "runs": records,
  }


def run(
  protocol_path=PROTOCOL,
  runs_dir=RUNS,
  results=RESULTS,
  arms=None,
  seeds=None,
  log=print,
  commit=None,
):
  """Run (or resume) every arm and seed of the protocol, arm by arm; rewrite ``results``
  after every run. ``arms`` / ``seeds`` pick a subset (tests); ``commit``: the HEAD the
  process started from (default: HEAD now)."""
  from absl import logging

  from experiments.coevolution import results as results_lib
  from experiments.coevolution import train

  logging.set_verbosity(logging.WARNING)
  protocol = load_protocol(protocol_path)
  results = Path(results)
  commit = commit or _git_commit()
  for arm in arms or list(protocol["arms"]):
    for seed in protocol["seeds"] if seeds is None else seeds:
      config = arm_config(protocol, arm, seed)
      workdir = Path(runs_dir) / f"{arm}_s{seed}"
      overrides = {**protocol["common"], **protocol["arms"][arm]["overrides"], "seed": seed}
      flat = results_lib.flat_overrides(overrides)
      flags = " ".join(f"--config.{k}={v}" for k, v in flat.items())
      log(
        "$ python -m experiments.coevolution.main --config "
        f"experiments/coevolution/configs/ring8_3x3.py --workdir {workdir} {flags}"
      )
      if (workdir / "summary.json").exists():
        log("  (finished before: kept)")
      else:
        resumed = (workdir / "checkpoints").exists()
        t0, c0 = time.perf_counter(), time.process_time()
        row = train.train(config, workdir, resume=resumed)
        timing = {
          "wall_seconds": time.perf_counter() - t0,
          "cpu_seconds": time.process_time() - c0,
          "resumed": resumed,
          "load_average": os.getloadavg(),
          "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
          "commit": commit,  # HEAD when the study process started
        }
        (workdir / "timing.json").write_text(json.dumps(timing))
        log(
          f"  {arm} seed {seed}: modes {row['mixture/modes_covered']}, HQ "
          f"{row['mixture/high_quality_rate']:.3f}, pooled {row.get('grid/modes_covered')} / "
          f"{row.get('grid/high_quality_rate', float('nan')):.3f}; wall "
          f"{timing['wall_seconds']:.0f} s, CPU {timing['cpu_seconds']:.0f} s"
        )
      data = collect(protocol, runs_dir, protocol_path)
      results.parent.mkdir(parents=True, exist_ok=True)
      tmp = results.with_suffix(".tmp")
      tmp.write_text(json.dumps(data, indent=1) + "\n")
      tmp.replace(results)
  log(f"done: {results}")


# -- the README blocks ---------------------------------------------------------------------

PRIMARY = {  # metric -> (label in the verdicts, digits of the verdicts, digits of the values)
  "mixture/modes_covered": ("modes covered (of 8)", 1, 0),
  "mixture/high_quality_rate": ("high-quality rate", 2, 3),
}
BAR = (7, 0.8)  # issue 18's bar: >= 7 of 8 modes with a high-quality rate >= 0.8
# Short names of the arms in the tables and verdicts (the protocol's labels are longer).
NAMES = {
  "reference": "reference coupling",
  "reference_as_run": "reference coupling, lr mutation as run",
  "selection": "selection",
  "plain_gan": "plain GAN",
}


def _name(protocol: dict, arm: str) -> str:
  return NAMES.get(arm, protocol["arms"][arm]["label"])


def _seed_list(seeds) -> str:
  seeds = list(seeds)
  if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
    return f"{seeds[0]}-{seeds[-1]}"
  return ", ".join(str(s) for s in seeds)


def _values(runs: list[dict], arm: str, key: str) -> list[float]:
  return [float(r[key]) for r in runs if r["arm"] == arm]


def _fmt(v: float, digits: int) -> str:
  return f"{v:.{digits}f}"


def _mean_sd_cell(values, digits: int) -> str:
  from experiments import stats

  if not values:
    return "-"
  return stats.fmt_mean_sd(values, max(digits, 1))


def primary_results(protocol: dict, data: dict) -> list[dict]:
  """The primary family: one ``stats.compare`` per (metric, comparison), with the raw and
  the Holm-adjusted p (over the tests that could run) and the verdict sentence."""
  from experiments import stats

  pr = protocol["primary"]
  runs = data["runs"]
  metrics = pr["metric"] if isinstance(pr["metric"], list) else [pr["metric"]]
  out = []
  for metric in metrics:
    for a, b in pr["comparisons"]:
      va, vb = _values(runs, a, metric), _values(runs, b, metric)
      if not va or not vb:
        continue
      r = stats.compare(va, vb, test=pr["test"], alternative=pr["alternative"])
      out.append({"metric": metric, "a": a, "b": b, "result": r})
  if pr.get("correction") == "holm" and out:
    for o, adj in zip(out, stats.holm([o["result"]["p"] for o in out])):
      o["p_adjusted"] = adj
  else:
    for o in out:
      o["p_adjusted"] = o["result"]["p"]
  for o in out:
    label, digits, _ = PRIMARY.get(o["metric"], (o["metric"], 2, 2))
    o["verdict"] = stats.verdict(
      {**o["result"], "p": o["p_adjusted"]},
      alpha=pr["alpha"],
      name_a=_name(protocol, o["a"]),
      name_b=_name(protocol, o["b"]),
      lower_is_better=pr.get("lower_is_better", True),
      metric=label,
      digits=digits,
    )
  return out


def table(protocol: dict, data: dict) -> str:
  """The ``ring_v1`` block: every seed's final mixture per arm, the verdicts of the
  primary family (Holm), the secondary metrics (pooled grid, per-cell modes, seconds)."""
  arms, seeds, runs = protocol["arms"], protocol["seeds"], data["runs"]
  by = {(r["arm"], r["seed"]): r for r in runs}
  lines = _header_lines(protocol, data, by)
  lines += _final_mixture_table(protocol, runs, by)
  lines += _verdict_lines(protocol, data)
  lines += _secondary_table(protocol, by)
  grid_arms = [
    a for a in arms if arms[a]["overrides"].get("rows", 3) * arms[a]["overrides"].get("cols", 3) > 1
  ]
  lines += [
    "",
    f"Each cell's mode count at {protocol['endpoint']} (rows of the torus separated by `/`):",
    "",
    "| seed | " + " | ".join(_name(protocol, a) for a in grid_arms) + " |",
    "|---|" + "---|" * len(grid_arms),
  ]
  for s in seeds:
    cells = []
    for a in grid_arms:
      r = by.get((a, s))
      cells.append(
        " / ".join(" ".join(str(v) for v in row) for row in r["cells/modes_covered"]) if r else "-"
      )
    lines.append(f"| {s} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def _header_lines(protocol: dict, data: dict, by: dict) -> list[str]:
  """Where the numbers come from, and which runs are missing."""
  arms, seeds = protocol["arms"], protocol["seeds"]
  n_in = {a: sum((a, s) in by for s in seeds) for a in arms}
  where = paths(protocol["version"])
  lines = [
    f"Pre-registered: `{data['protocol']}` (registered {protocol['registered']}, before the "
    f"runs), {protocol['endpoint']}, seeds {_seed_list(seeds)}; host {data['host']['cpu']} "
    f"({data['host']['cpus']} CPUs, JAX {data['host']['jax']}), code of commit "
    f"{data['commit']}; JSON `{where['results'].relative_to(REPO)}`, figure "
    f"`{where['figure'].relative_to(REPO)}`.",
    "",
  ]
  missing = [f"{_name(protocol, a)} {n_in[a]}/{len(seeds)}" for a in arms if n_in[a] < len(seeds)]
  if missing:
    lines += [
      f"**Incomplete**: runs finished: {', '.join(missing)}; the tests below use the runs "
      "that finished, not the registered n.",
      "",
    ]
  return lines


def _final_mixture_table(protocol: dict, runs: list, by: dict) -> list[str]:
  """Every seed's final mixture (modes and HQ) per arm, and each arm's mean and sd."""
  arms, seeds = protocol["arms"], protocol["seeds"]
  head = ["seed"]
  for a in arms:
    head += [f"{_name(protocol, a)}: modes / 8", "HQ"]
  lines = [
    f"**The final mixture at {protocol['endpoint']}** (plain GAN: its generator; "
    f"{protocol['settings']['num_eval_samples']} samples):",
    "",
  ]
  lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for s in seeds:
    row = [str(s)]
    for a in arms:
      r = by.get((a, s))
      row += (
        [str(r["mixture/modes_covered"]), _fmt(r["mixture/high_quality_rate"], 3)]
        if r
        else ["-", "-"]
      )
    lines.append("| " + " | ".join(row) + " |")
  row = ["mean ± sd"]
  for a in arms:
    row += [
      _mean_sd_cell(_values(runs, a, "mixture/modes_covered"), 1),
      _mean_sd_cell(_values(runs, a, "mixture/high_quality_rate"), 2),
    ]
  return lines + ["| " + " | ".join(row) + " |", ""]


def _verdict_lines(protocol: dict, data: dict) -> list[str]:
  """The primary family's verdicts (Holm-adjusted p, then the raw p)."""
  from experiments import stats

  pr = protocol["primary"]
  family = primary_results(protocol, data)
  n_metrics = len(pr["metric"]) if isinstance(pr["metric"], list) else 1
  registered = f"{len(pr['comparisons'])} comparisons x {n_metrics} metrics"
  if len(family) < len(pr["comparisons"]) * n_metrics:
    registered = f"of the registered {registered}, those with runs in both arms"
  lines = [
    f"**Verdicts** (exact Mann-Whitney, {pr['alternative']}, alpha {pr['alpha']:g}; the p in "
    f"each sentence is Holm-adjusted over the {len(family)} primary tests ({registered}); "
    "the raw p follows it):",
    "",
  ]
  for o in family:
    lines.append(f"- {o['verdict']} Raw p = {stats.fmt_p(o['result']['p'])}.")
  return lines


def _spread(rs: list, key: str) -> str:
  """Median (range) of ``key`` over the runs ``rs`` that have it."""
  v = sorted(r[key] for r in rs if r.get(key) is not None)
  if not v:
    return "-"
  return f"{v[len(v) // 2]:.0f} ({v[0]:.0f}-{v[-1]:.0f})"


def _secondary_table(protocol: dict, by: dict) -> list[str]:
  """Pooled cells, issue 18's bar, the mixture's mode KL and the seconds per arm."""
  from experiments import stats

  arms, seeds = protocol["arms"], protocol["seeds"]
  lines = [
    "",
    "**Secondary** (no test): every cell's best generator pooled with equal weights (500 "
    f"samples each); seeds meeting issue 18's bar (>= {BAR[0]} modes with HQ >= {BAR[1]:g}, "
    "by the mixture or the pooled cells); wall and CPU seconds per run (the first seed of an "
    "arm includes the compile), median and range:",
    "",
    "| arm | pooled modes / 8 (every seed) | pooled HQ | bar: mixture | bar: pooled |"
    " mode KL of the mixture | wall s | CPU s |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for a in arms:
    rs = [by[(a, s)] for s in seeds if (a, s) in by]
    if not rs:
      lines.append(f"| {_name(protocol, a)} | - | - | - | - | - | - | - |")
      continue
    pm = [float(r["grid/modes_covered"]) for r in rs]
    ph = [float(r["grid/high_quality_rate"]) for r in rs]
    ok_m = sum(
      r["mixture/modes_covered"] >= BAR[0] and r["mixture/high_quality_rate"] >= BAR[1] for r in rs
    )
    ok_p = sum(
      r["grid/modes_covered"] >= BAR[0] and r["grid/high_quality_rate"] >= BAR[1] for r in rs
    )
    kl = [float(r["mixture/mode_kl"]) for r in rs]
    lines.append(
      f"| {_name(protocol, a)} | {_mean_sd_cell(pm, 1)} ({' '.join(f'{x:.0f}' for x in pm)}) | "
      f"{stats.fmt_mean_sd(ph, 2)} ({_decimals(ph)}) | {ok_m}/{len(rs)} | {ok_p}/{len(rs)} | "
      f"{stats.fmt_mean_sd(kl, 2)} | {_spread(rs, 'wall_seconds')} | "
      f"{_spread(rs, 'cpu_seconds')} |"
    )
  return lines


def readme_table() -> str:
  """The README block ``ring_v1`` from the committed protocol and JSON."""
  return table(load_protocol(), json.loads(RESULTS.read_text()))


def readme_table_v2() -> str:
  """The README block ``ring_v2`` (issue 33's learning-rate mutation as run) from the
  committed protocol and JSON; until its JSON is committed, a line saying so."""
  where = paths(2)
  if not where["results"].exists():
    return f"No runs yet: `{where['results'].relative_to(REPO)}` is not there."
  return table(load_protocol(where["protocol"]), json.loads(where["results"].read_text()))


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
      v = np.array(_values(data["runs"], a, key))
      p = np.array(_values(data["runs"], a, pooled))
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
    ax.set_xticks(range(len(arms)), [_name(protocol, a) for a in arms], fontsize=8)
    ax.set_title(title, fontsize=10)
    if key.endswith("modes_covered"):
      ax.set_ylim(0, 8.5)
    else:
      ax.set_ylim(0, 1.02)
  axes[0].legend(fontsize=7, loc="upper right")
  n = {a: len(_values(data["runs"], a, "mixture/modes_covered")) for a in arms}
  fig.suptitle(
    f"ring8_3x3, generation 40, seeds per arm: {', '.join(str(n[a]) for a in arms)}", fontsize=9
  )
  fig.tight_layout()
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path)
  plt.close(fig)
  return path


# -- the earlier exploratory study of issue 18 (not pre-registered) ---------------------------

ISSUE18_NOTE = (
  "Earlier exploratory study (issue 18), not pre-registered: 1-5 seeds per variant, no test; "
  f"generated from `{ISSUE18.relative_to(REPO)}`; ± is the sample standard deviation."
)


def _issue18_groups() -> dict[str, list[dict]]:
  groups: dict[str, list[dict]] = {}
  for r in json.loads(ISSUE18.read_text()):
    groups.setdefault(r["run"].rsplit("_s", 1)[0], []).append(r)
  return groups


def _ints(values) -> str:
  return " ".join(f"{v:.0f}" for v in values)


def _decimals(values, digits: int = 2) -> str:
  return " ".join(f"{v:.{digits}f}" for v in values)


def issue18_table() -> str:
  """The README block ``ring_issue18``: every variant of the issue-18 study, every seed."""
  from experiments import stats

  lines = [
    ISSUE18_NOTE,
    "",
    "| variant | seeds | mixture modes (per seed) | mixture HQ (per seed) | pooled modes (per seed)"
    " | pooled HQ (per seed) | ok mixture | ok pooled | wall s (mean) |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for name, runs in _issue18_groups().items():
    m = [float(r["mixture/modes_covered"]) for r in runs]
    h = [float(r["mixture/high_quality_rate"]) for r in runs]
    gm = [float(r["grid/modes_covered"]) for r in runs]
    gh = [float(r["grid/high_quality_rate"]) for r in runs]
    ok = sum(a >= BAR[0] and b >= BAR[1] for a, b in zip(m, h))
    okp = sum(a >= BAR[0] and b >= BAR[1] for a, b in zip(gm, gh))
    wall = sum(r["wall_seconds"] for r in runs) / len(runs)
    lines.append(
      f"| {name} | {len(runs)} | {stats.fmt_mean_sd(m, 1)} ({_ints(m)}) | "
      f"{stats.fmt_mean_sd(h, 2)} ({_decimals(h)}) | {stats.fmt_mean_sd(gm, 1)} ({_ints(gm)}) | "
      f"{stats.fmt_mean_sd(gh, 2)} ({_decimals(gh)}) | {ok}/{len(runs)} | {okp}/{len(runs)} | "
      f"{wall:.0f} |"
    )
  return "\n".join(lines)


def _issue18_pairs(grid: str, single: str, grid_label: str, single_label: str) -> str:
  from experiments import stats

  groups = _issue18_groups()
  g = {int(r["run"].rsplit("_s", 1)[1]): r for r in groups[grid]}
  o = {int(r["run"].rsplit("_s", 1)[1]): r for r in groups[single]}
  seeds = sorted(set(g) & set(o))
  head = (
    f"| seed | {grid_label}: best mixture modes / 8 | HQ | all cells pooled modes | HQ | "
    f"{single_label}: modes / 8 | HQ |"
  )
  lines = [
    f"(Earlier exploratory study, not pre-registered: `{grid}` beside `{single}`, generated "
    f"from `{ISSUE18.relative_to(REPO)}`; ± is the sample standard deviation.)",
    "",
    head,
    "|---|---|---|---|---|---|---|",
  ]
  cols = [
    (g, "mixture/modes_covered"),
    (g, "mixture/high_quality_rate"),
    (g, "grid/modes_covered"),
    (g, "grid/high_quality_rate"),
    (o, "mixture/modes_covered"),
    (o, "mixture/high_quality_rate"),
  ]
  for s in seeds:
    vals = [src[s][k] for src, k in cols]
    lines.append(
      f"| {s} | "
      + " | ".join(f"{v:.0f}" if i % 2 == 0 else f"{v:.2f}" for i, v in enumerate(vals))
      + " |"
    )
  means = [
    stats.fmt_mean_sd([src[s][k] for s in seeds], 1 if i % 2 == 0 else 2)
    for i, (src, k) in enumerate(cols)
  ]
  lines.append("| mean ± sd | " + " | ".join(means) + " |")
  return "\n".join(lines)


def issue18_main_pairs() -> str:
  """Block ``ring_issue18_main``: the main job's grid (``t2``) beside one GAN."""
  return _issue18_pairs("t2_g40", "r2_1x1_g40", "grid", "one GAN")


def issue18_nosel_own_pairs() -> str:
  """Block ``ring_issue18_nosel_own``: no interaction beside the same lone GAN."""
  return _issue18_pairs("nosel_own_g40", "r2_1x1_g40", "no interaction", "one GAN")


def issue18_nosel_own_long_pairs() -> str:
  """Block ``ring_issue18_nosel_own_long``: no interaction at 5x the budget beside one GAN
  with the same 450 000 steps."""
  return _issue18_pairs(
    "nosel_own_long_g40", "r2_1x1_long_g40", "no interaction, 5x budget", "one GAN, same steps"
  )


BLOCKS = {
  "ring_v1": "readme_table",
  "ring_v2": "readme_table_v2",
  "ring_issue18": "issue18_table",
  "ring_issue18_main": "issue18_main_pairs",
  "ring_issue18_nosel_own": "issue18_nosel_own_pairs",
  "ring_issue18_nosel_own_long": "issue18_nosel_own_long_pairs",
}
for _block, _func in BLOCKS.items():
  _report.register(_block, README, f"experiments.coevolution.ring_study:{_func}")


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("what", choices=["run", "resume", "table", "figure"])
  ap.add_argument("--write", action="store_true", help="table: write the README blocks")
  ap.add_argument("--version", type=int, default=1, choices=(1, 2), help="run/figure: protocol")
  args = ap.parse_args(argv)
  where = paths(args.version)
  if args.what in ("run", "resume"):
    protocol, say = load_protocol(where["protocol"]), lambda s: print(s, flush=True)
    if protocol.get("run_order") is None:  # arm-major (ring.v1)
      run(where["protocol"], where["runs"], where["results"], log=say)
    head = _git_commit()  # the code this process imports once, for every seed
    for seed in protocol["seeds"] if protocol.get("run_order") else ():  # seed-major
      run(where["protocol"], where["runs"], where["results"], seeds=[seed], log=say, commit=head)
  elif args.what == "table":
    for name in BLOCKS:
      body = _report.make(name)
      if args.write:
        changed = _report.write_block(REPO / README, name, body)
        print(f"{README} [{name}]: {'rewritten' if changed else 'unchanged'}")
      else:
        print(body + "\n")
  else:
    protocol = load_protocol(where["protocol"])
    print(figure(protocol, json.loads(where["results"].read_text()), where["figure"]))


if __name__ == "__main__":
  main()
