"""The ring study's pre-registered README blocks (``ring_v1``, ``ring_v2``, ``ring_v3``): every
seed's final mixture per arm, the primary family's verdicts (Mann-Whitney, Holm) and the secondary
metrics, generated from the committed protocol and results JSON (see :mod:`ring_study` for the
runs)."""

from __future__ import annotations

import json
from pathlib import Path

from experiments import _report, registration

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PROTOCOL = HERE / "protocols" / "ring.v1.json"
RESULTS = HERE / "results" / "ring_v1.json"
FIGURE = HERE / "results" / "ring_v1.png"
RUNS = REPO / "runs" / "ring_v1"
README = "experiments/coevolution/README.md"


def paths(version: int) -> dict:
  """Protocol, results JSON, figure and run folder of version ``version`` (1: the constants
  above; 2: issue 33's arm with the reference's learning-rate mutation as run; 3: issue 45's
  reference coupling, whole)."""
  return {
    "protocol": HERE / "protocols" / f"ring.v{version}.json",
    "results": HERE / "results" / f"ring_v{version}.json",
    "figure": HERE / "results" / f"ring_v{version}.png",
    "runs": REPO / "runs" / f"ring_v{version}",
  }


def load_protocol(path=PROTOCOL) -> dict:
  return _report.load_protocol(path)


PRIMARY = {  # metric -> (label in the verdicts, digits of the verdicts, digits of the values)
  "mixture/modes_covered": ("modes covered (of 8)", 1, 0),
  "mixture/high_quality_rate": ("high-quality rate", 2, 3),
}
BAR = (7, 0.8)  # issue 18's bar: >= 7 of 8 modes with a high-quality rate >= 0.8
# Short names of the arms in the tables and verdicts (the protocol's labels are longer).
NAMES = {
  "reference": "reference coupling",
  "reference_as_run": "reference coupling, lr mutation as run",
  "reference_whole": "reference coupling, whole",
  "selection": "selection",
  "plain_gan": "plain GAN",
}


def arm_name(protocol: dict, arm: str) -> str:
  return NAMES.get(arm, protocol["arms"][arm]["label"])


def seed_list(seeds) -> str:
  seeds = list(seeds)
  if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
    return f"{seeds[0]}-{seeds[-1]}"
  return ", ".join(str(s) for s in seeds)


def arm_values(runs: list[dict], arm: str, key: str) -> list[float]:
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
      va, vb = arm_values(runs, a, metric), arm_values(runs, b, metric)
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
      name_a=arm_name(protocol, o["a"]),
      name_b=arm_name(protocol, o["b"]),
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
    "| seed | " + " | ".join(arm_name(protocol, a) for a in grid_arms) + " |",
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
  lines += _curve_lines(protocol, runs)
  lines += _report.endpoint_lines(
    data["protocol"],
    [
      "the **Verdicts** above",
      "above (the **Secondary** table: pooled modes and HQ)",
      "above (each cell's mode count)",
      "above (the **Secondary** table: mode KL of the mixture)",
      "above (the final mixture at the earlier generations)",
      "above (the **Secondary** table: bar)",
      "above (the **Secondary** table: wall and CPU seconds)",
    ],
    data.get("registration"),
  )
  return "\n".join(lines)


def _curve_lines(protocol: dict, runs: list) -> list[str]:
  """The registered curves (no verdict): per arm, the final mixture's mean modes and HQ at
  each earlier evaluated generation, over the seeds that have it."""
  gens = sorted({c["generation"] for r in runs for c in r.get("curve", [])})[:-1]
  if not gens:
    return []
  lines = ["", "The final mixture at the earlier generations (mean over seeds; no test):", ""]
  lines += ["| arm | " + " | ".join(f"gen {g}: modes / HQ" for g in gens) + " |"]
  lines.append("|---|" + "---|" * len(gens))
  for a in protocol["arms"]:
    cells = []
    for g in gens:
      at = [c for r in runs if r["arm"] == a for c in r.get("curve", []) if c["generation"] == g]
      modes, hq = (sum(c[k] for c in at) / len(at) if at else None for k in ("modes", "hq"))
      cells.append(f"{modes:.1f} / {hq:.2f}" if at else "-")
    lines.append(f"| {arm_name(protocol, a)} | " + " | ".join(cells) + " |")
  return lines


def _header_lines(protocol: dict, data: dict, by: dict) -> list[str]:
  """Where the numbers come from, and which runs are missing."""
  arms, seeds = protocol["arms"], protocol["seeds"]
  n_in = {a: sum((a, s) in by for s in seeds) for a in arms}
  where = paths(protocol["version"])
  lines = [
    f"Pre-registered: `{data['protocol']}` (registered "
    f"{registration.registered(REPO / data['protocol'], protocol.get('registered'))}), "
    f"{protocol['endpoint']}, seeds {seed_list(seeds)}; host {data['host']['cpu']} "
    f"({data['host']['cpus']} CPUs, JAX {data['host']['jax']}), code of commit "
    f"{data['commit']}; JSON `{where['results'].relative_to(REPO)}`, figure "
    f"`{where['figure'].relative_to(REPO)}`.",
    "",
  ]
  missing = [
    f"{arm_name(protocol, a)} {n_in[a]}/{len(seeds)}" for a in arms if n_in[a] < len(seeds)
  ]
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
    head += [f"{arm_name(protocol, a)}: modes / 8", "HQ"]
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
      _mean_sd_cell(arm_values(runs, a, "mixture/modes_covered"), 1),
      _mean_sd_cell(arm_values(runs, a, "mixture/high_quality_rate"), 2),
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
    f"samples each); seeds meeting the ring's bar (>= {BAR[0]} modes with HQ >= {BAR[1]:g}, "
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
      lines.append(f"| {arm_name(protocol, a)} | - | - | - | - | - | - | - |")
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
      f"| {arm_name(protocol, a)} | {_mean_sd_cell(pm, 1)} ({' '.join(f'{x:.0f}' for x in pm)}) | "
      f"{stats.fmt_mean_sd(ph, 2)} ({decimals(ph)}) | {ok_m}/{len(rs)} | {ok_p}/{len(rs)} | "
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


def readme_table_v3() -> str:
  """The README block ``ring_v3`` (issue 45's reference coupling, whole, beside the plain
  GAN) from the committed protocol and JSON; until its JSON is committed, a line saying so."""
  where = paths(3)
  if not where["results"].exists():
    return f"No runs yet: `{where['results'].relative_to(REPO)}` is not there."
  protocol = load_protocol(where["protocol"])
  head, rest = table(protocol, json.loads(where["results"].read_text())).split("\n\n", 1)
  said = f"**Supersedes** (the protocol's words): {protocol['supersedes'].rstrip('.')}."
  return f"{head}\n\n{said}\n\n{rest}"


def decimals(values, digits: int = 2) -> str:
  """``values`` with ``digits`` decimals, separated by spaces."""
  return " ".join(f"{v:.{digits}f}" for v in values)


BLOCKS = {"ring_v1": "readme_table", "ring_v2": "readme_table_v2", "ring_v3": "readme_table_v3"}
for _block, _func in BLOCKS.items():
  _report.register(_block, README, f"{__name__}:{_func}")
