"""Generated blocks of the guides: the measured numbers ``docs/running.md`` and
``docs/coevolution.md`` quote, made from the committed benchmark JSON
(``experiments/benchmarks/results``) so that no such number is typed into a page.

- ``first_generation`` (``docs/running.md``): the main job's time to its first generation line,
  cold and warm, from every ``*speed_claims*first_generation.json``
  (``experiments/benchmarks/first_generation.py`` run by ``speed_claims.py``).
- ``lipizzaner_side_by_side`` (``docs/coevolution.md``): Lipizzaner's own code and minmaxlab on
  the same 2x2 full-epoch MNIST-MLP work on one host, from every
  ``*lipizzaner_side_by_side*.json`` (two record layouts: the first run's and
  ``experiments/benchmarks/lipizzaner_side_by_side.py``'s).
- ``speed_claims`` (``docs/benchmarks.md``): every target of every committed
  ``speed_claims.py`` summary (``*speed_claims*.json`` whose ``benchmark`` is ``speed_claims``),
  its value, spread, target and whether it is met, with the run's host and times.
- ``speed_claims_figures`` (``docs/benchmarks.md``): the figures behind those targets, from the
  benchmark JSON each summary names (compile modes, the equal-work floor, the Lookahead-minmax
  overhead, Lipizzaner side by side) and the longer Lookahead runs of alternating
  (``*transform_overhead_alternating_*rounds*.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from experiments import _report

RESULTS = Path(_report.REPO) / "experiments" / "benchmarks" / "results"


def _rel(path: Path) -> str:
  return path.relative_to(_report.REPO).as_posix()


def first_generation() -> str:
  """The block ``first_generation``: per committed run, seconds from the start of the main
  job to its first generation line (cold cache, warm with a new workdir, warm resuming), the
  step's compile or load line, and the size of the cache."""
  lines = [
    "| run (JSON) | cold | warm, new workdir | warm, resuming | compile / load lines | cache |",
    "|---|---|---|---|---|---|",
  ]
  for path in sorted(RESULTS.glob("*speed_claims*first_generation.json")):
    d = json.loads(path.read_text())
    cells = [f"{d[k]['to_first_generation_s']:.1f} s" for k in ("cold", "warm_new", "warm_resume")]
    said = "; ".join(x for k in ("cold", "warm_new", "warm_resume") for x in d[k]["compile_lines"])
    lines.append(
      f"| `{_rel(path)}` | {' | '.join(cells)} | {said or '-'} | {d['cache_mb']:.1f} MB |"
    )
  return "\n".join(lines)


def _side_by_side(d: dict) -> dict:
  """One side-by-side record in the later layout's terms."""
  if "lipizzaner" in d:
    lip, mml = d["lipizzaner"], d["minmaxlab"]
    return {
      "date": d["lipizzaner_utc"][0][:10],
      "cpu": d["machine"]["cpu_model"],
      "lip_s": lip["median_s"],
      "lip_cpu": lip["client_cpu_s_per_generation"],
      "mml_s": mml["median_s"],
      "mml_cpu": mml["cpu_s_median"],
      "wall": d["wall_ratio"],
      "cpu_ratio": d["cpu_ratio"],
    }
  return {
    "date": d["date"],
    "cpu": d["cpu_model"],
    "lip_s": d["lipizzaner_s_per_iteration_median"],
    "lip_cpu": d["lipizzaner_grid_cpu_s_per_generation"],
    "mml_s": d["minmaxlab_s_per_generation_median"],
    "mml_cpu": d["minmaxlab_cpu_s_per_generation_median"],
    "wall": d["wall_ratio"],
    "cpu_ratio": d["cpu_ratio"],
  }


def lipizzaner_side_by_side() -> str:
  """The block ``lipizzaner_side_by_side``: per committed run, Lipizzaner's and minmaxlab's
  median seconds and CPU seconds per generation and the ratios."""
  lines = [
    "| run (JSON) | host | Lipizzaner: s / CPU s per generation | minmaxlab: s / CPU s |"
    " Lipizzaner / minmaxlab: wall, CPU |",
    "|---|---|---|---|---|",
  ]
  for path in sorted(RESULTS.glob("*lipizzaner_side_by_side*.json")):
    r = _side_by_side(json.loads(path.read_text()))
    lines.append(
      f"| `{_rel(path)}` | {r['cpu']}, {r['date']} | {r['lip_s']:.1f} / {r['lip_cpu']:.1f} | "
      f"{r['mml_s']:.2f} / {r['mml_cpu']:.2f} | {r['wall']:.2f}x, {r['cpu_ratio']:.2f}x |"
    )
  return "\n".join(lines)


def _summaries() -> list[tuple[Path, dict]]:
  """The committed ``speed_claims.py`` summaries, in file-name order (run 1, 2, ...)."""
  found = [(p, json.loads(p.read_text())) for p in sorted(RESULTS.glob("*speed_claims*.json"))]
  return [(p, d) for p, d in found if d.get("benchmark") == "speed_claims"]


def _claim_value(v: float, target: str) -> str:
  """A target's value in the target's unit: signed percent, seconds, a share or a ratio."""
  if "%" in target:
    return f"{v:+.1%}"
  if target.endswith(" s"):
    return f"{v:.2f} s"
  if target.startswith(">="):
    return f"{v:.1%}"
  return f"{v:.3f}"


def _spread(t: dict) -> str:
  if "per_repeat" in t:
    r = t["per_repeat"]
    return f"{_claim_value(min(r), t['target'])} to {_claim_value(max(r), t['target'])} ({len(r)})"
  if "quartiles" in t:
    q1, q3 = t["quartiles"]
    return f"quartiles {_claim_value(q1, t['target'])}, {_claim_value(q3, t['target'])}"
  return "-"


def _host(d: dict) -> str:
  m = d["machine"]
  loads = [
    x
    for r in d["runs"].values()
    for k in ("load_average_before", "load_average_after")
    for x in r[k][:1]
  ]
  return (
    f"{d['started']} to {d['ended']}, {m['cpu_model']} (family {m['cpu_family']}, model "
    f"{m['model']}, AVX-512 {'yes' if m.get('avx512') else 'no'}), {m['cpus']} CPUs; "
    f"1-minute load {min(loads):.1f}-{max(loads):.1f} around the benchmarks; "
    f"{sum(r['seconds'] for r in d['runs'].values()) / 60:.0f} minutes of benchmarks"
  )


def speed_claims() -> str:
  """The block ``speed_claims``: per committed summary, its host and times and one row per
  target (value, spread over repeats or rounds, target, met)."""
  lines = []
  for i, (path, d) in enumerate(_summaries()):
    lines += [
      f"**Run {i + 1}** (`{_rel(path)}`): {_host(d)}.",
      "",
      "| target | value | spread | target | met |",
      "|---|---|---|---|---|",
    ]
    for t in d["targets"]:
      met = "yes" if t["met"] else "**no**"
      lines.append(
        f"| {t['claim']} | **{_claim_value(t['value'], t['target'])}** | {_spread(t)} | "
        f"{t['target']} | {met} |"
      )
    lines.append("")
  return "\n".join(lines)


def _compile_modes(runs) -> list[str]:
  lines = [
    "Compile seconds of the generation step, median of the cold compiles (CPU seconds), and the"
    " generation's time relative to `default` (median); the config's own mode in bold:",
    "",
    "| run | config | `default` | `fast` | `fastest` | generation `fast` / `fastest` |",
    "|---|---|---|---|---|---|",
  ]
  for i, d in runs:
    for config, c in d.get("figures", {}).get("compile_modes", {}).items():
      cells = []
      for mode in ("default", "fast", "fastest"):
        m = c["modes"][mode]
        cell = f"{m['compile_s_median']:.2f} s ({m['compile_cpu_s_median']:.1f})"
        cells.append(f"**{cell}**" if mode == c["own"] else cell)
      gen = " / ".join(
        f"{c['modes'][m]['generation_ratio_to_default_median']:.2f}" for m in ("fast", "fastest")
      )
      lines.append(f"| {i} | {config} | {' | '.join(cells)} | {gen} |")
  return lines


def _floor(runs) -> list[str]:
  lines = [
    "Equal-work floor (2x2 full-epoch generation, library against the plain-JAX floor; per"
    " repeat, interleaved):",
    "",
    "| run | matmul GFLOP, library / floor | library / floor per repeat | median |"
    " s / CPU s per generation, library; floor | XLA's matmul mix | training's share of it,"
    " library / floor | 2-batch programs s, library / floor |",
    "|---|---|---|---|---|---|---|---|",
  ]
  pooled = []
  for i, d in runs:
    if "floor" not in d["runs"]:
      continue
    f = json.loads((RESULTS / d["runs"]["floor"]["file"]).read_text())
    lib, flo = f["programs"]["map_s600_d2"], f["programs"]["floor_s600_d2"]
    lib2, flo2 = f["programs"]["map_s2_d2"], f["programs"]["floor_s2_d2"]
    reps = lib["ratio_to_floor_same_rep"]
    pooled += reps
    lines.append(
      f"| {i} | {lib['matmul_gflop_per_generation']:.2f} / {flo['matmul_gflop_per_generation']:.2f}"
      f" | {' '.join(f'{r:.3f}' for r in reps)} | **{lib['ratio_to_floor_median']:.3f}** | "
      f"{lib['median_s']:.2f} / {lib['cpu_s_median']:.1f}; {flo['median_s']:.2f} / "
      f"{flo['cpu_s_median']:.1f} | {f['xla_matmul_gflops_train_mix']:.1f} GFLOP/s | "
      f"{lib['train_fraction_of_xla_matmul_mix']:.1%} / "
      f"{flo['train_fraction_of_xla_matmul_mix']:.1%} | "
      f"{lib2['median_s']:.2f} / {flo2['median_s']:.2f} |"
    )
  if pooled:
    q1, med, q3 = np.percentile(pooled, [25, 50, 75])
    below = sum(r <= 1.0 for r in pooled)
    lines += [
      "",
      f"Pooled over the {len(pooled)} repeats: median **{med:.3f}** (quartiles {q1:.3f}-{q3:.3f},"
      f" range {min(pooled):.3f}-{max(pooled):.3f}), {below} of {len(pooled)} at or below 1.0.",
    ]
  return lines


def _paired(r: dict, key: str) -> str:
  p = r.get(key)
  return f"{p['median']:+.1%}" if p else "-"


def _overhead_rows(label: str, d: dict) -> list[str]:
  rows = []
  for scheme, r in d["results"]["mlp_gan"].items():
    p = r["overhead_paired"]
    rounds = p.get("rounds")
    interval = "-"
    if rounds:
      from experiments import stats

      lo, hi = stats.bootstrap_ci(rounds, np.median)
      interval = f"{lo:+.1%} to {hi:+.1%}"
    other = (
      f"{r['other_layout']} {_paired(r, 'overhead_other_layout_paired')}"
      if "other_layout" in r
      else "-"
    )
    k0, k1 = r["step_kernels"]
    rows.append(
      f"| {label} | {d['repeats']} | {scheme} (`{r['layout']}`) | {r['step_ms']:.2f} | "
      f"**{p['median']:+.1%}** ({p['q1']:+.1%}, {p['q3']:+.1%}) | {interval} | "
      f"{r['overhead']:+.1%} | {_paired(r, 'overhead_cpu_paired')} | "
      f"{_paired(r, 'overhead_no_sync_paired')} | {other} | {k0} / {k1} | "
      f"{r['step_bytes_ratio']:.3f} |"
    )
  return rows


def _overhead(runs) -> list[str]:
  lines = [
    "Lookahead-minmax overhead on the MLP GAN (G 64-256-256-784, D 784-256-256-1, batch 100):"
    " per round the time ratio to the plain scheme, median over the rounds (quartiles), and the"
    " same read other ways:",
    "",
    "| run (JSON) | rounds | scheme (layout) | plain step ms | paired median (quartiles) |"
    " bootstrap 95% interval of it | ratio of medians | CPU time, paired | never syncing, paired |"
    " the other layout, paired | kernels of a step, plain / Lookahead | bytes of a step,"
    " Lookahead / plain |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for i, d in runs:
    if "overhead" in d["runs"]:
      f = json.loads((RESULTS / d["runs"]["overhead"]["file"]).read_text())
      lines += _overhead_rows(f"run {i}", f)
  longer = [
    json.loads(p.read_text()) | {"_path": p} for p in RESULTS.glob("*alternating_*rounds*.json")
  ]
  for d in sorted(longer, key=lambda d: d["repeats"]):
    lines += _overhead_rows(f"`{d['_path'].name}`", d)
  return lines


def speed_claims_figures() -> str:
  """The block ``speed_claims_figures``: the figures of each summary's benchmarks."""
  runs = [(i + 1, d) for i, (_, d) in enumerate(_summaries())]
  lines = _compile_modes(runs) + [""] + _floor(runs) + [""] + _overhead(runs)
  for i, d in runs:
    lip = d.get("figures", {}).get("lipizzaner")
    if lip:
      lines += [
        "",
        f"Lipizzaner itself, run {i} (the same host, after the floor): "
        f"{lip['lipizzaner_s_per_iteration']:.1f} s per iteration and "
        f"{lip['lipizzaner_client_cpu_s']:.1f} client CPU s; the library's generation "
        f"{lip['minmaxlab_s_per_generation']:.2f} s and {lip['minmaxlab_cpu_s']:.1f} CPU s: "
        f"**{lip['wall_ratio']:.2f}x** in wall time, **{lip['cpu_ratio']:.2f}x** in CPU time, "
        f"{lip['wall_ratio_without_fid']:.2f}x in wall time without Lipizzaner's FID.",
      ]
  return "\n".join(lines)


_report.register("first_generation", "docs/running.md", f"{__name__}:first_generation")
_report.register(
  "lipizzaner_side_by_side", "docs/coevolution.md", f"{__name__}:lipizzaner_side_by_side"
)
_report.register("speed_claims", "docs/benchmarks.md", f"{__name__}:speed_claims")
_report.register("speed_claims_figures", "docs/benchmarks.md", f"{__name__}:speed_claims_figures")
