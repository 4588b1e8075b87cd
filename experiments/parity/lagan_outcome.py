r"""Outcome parity of Lookahead-minmax (``protocols/lagan_outcome.v<N>.json``, pre-registered):
the reference's MNIST-notebook protocol on Fashion-MNIST through both systems, AltGAN and
LA-AltGAN (k = 1000), the same seeds on each side, both sides' generator samples scored by
ONE classifier (the library's evaluation classifier), the endpoint classifier-FID of the
EMA generator compared with two one-sided tests (``experiments.stats.tost``) at the
protocol's margin.

  python -m experiments.parity.lagan_outcome run --lagan PATH --python /work/refvenv/bin/python
  python -m experiments._report          # the blocks parity_lagan_outcome[_v2] of docs/parity.md

Version 2 (the current one, ``run``'s default ``--protocol``) runs the library side on the
notebook's own networks (``make_pair('dcgan_notebook')``) and draws (``latent_draws=
'per_player'``); version 1, which ran it on the library's DCGAN pair with shared latent
draws, is superseded and not run (:data:`STATUS`).

``run`` is the study runner's (``experiments.study``: :data:`REFERENCE`, then :data:`LIBRARY`,
the two sides in one results file): it starts only through the registration tool
(``experiments.registration``) and runs the reference's runs first (one torch thread, little
memory), then the library's. It is
resumable: the library's arms resume from their checkpoint at the last evaluation
(``lookahead_study.run_arm``), a reference run is one process that writes its samples
atomically at the end (``lagan_outcome_driver.py``), so a finished run is never redone and
an interrupted one starts again. Every finished run is scored at once and written to
``results/lagan_outcome.v<N>.json`` with the library side's progress; the block says, while
runs are missing, every arm's progress on each side and the CPU-hours left.
"""

from __future__ import annotations

import json
import math
import subprocess
import types
from pathlib import Path

import numpy as np

from experiments import _report, study  # the report needs neither jax nor torch

VERSIONS = (1, 2)
CURRENT = 2
# Why a version is not run (None: it runs); its block's **Incomplete:** line says it.
STATUS = {
  1: "superseded by v2 and not run: its library side trained the library's DCGAN pair with "
  "one latent batch shared by both players' fields, not the notebook's networks and draws",
  2: None,
}


def protocol_file(version: int = CURRENT) -> str:
  """The protocol of ``version``, relative to the repository."""
  return f"experiments/parity/protocols/lagan_outcome.v{version}.json"


def results_file(version: int = CURRENT) -> Path:
  """The results JSON of ``version``."""
  return _report.REPO / "experiments" / "parity" / "results" / f"lagan_outcome.v{version}.json"


PROTOCOL_FILE, RESULTS = protocol_file(), results_file()
DRIVER = Path(__file__).with_name("lagan_outcome_driver.py")
SYSTEMS = ("library", "reference")


def _args(protocol: dict):
  """The library side's study settings (``lookahead_study.study_config``'s ``args``)."""
  s = protocol["settings"]
  return types.SimpleNamespace(
    steps=s["steps"],
    eval_every=s["eval_every"],
    eval_samples=s["eval_samples"],
    lr=s["lr"],
    b1=s["b1"],
    batch_size=s["batch_size"],
    set=None,
    config_fields=s["config_fields"],
  )


def arm_spec(protocol: dict, arm: str) -> dict:
  return {k: v for k, v in protocol["arms"][arm].items() if k != "label"}


def _config(protocol: dict, arm: str):
  from experiments.gan import lookahead_study

  return lookahead_study.study_config(
    arm, protocol["seeds"][0], _args(protocol), arm_spec(protocol, arm)
  )


def reference_seed(ctx, arm: str, seed: int) -> dict:
  """One reference run (``lagan_outcome_driver.py``, one process that writes its samples
  atomically at its end: a cut-off run starts again), scored by the one classifier."""
  from experiments import _classifier_cache
  from experiments.gan import lookahead_study

  s, o, config = ctx.protocol["settings"], ctx.options, _config(ctx.protocol, arm)
  out = ctx.runs / "reference" / f"{arm}_s{seed}.npz"
  out.parent.mkdir(parents=True, exist_ok=True)
  if not out.exists():
    cmd = [o.python, str(DRIVER), "--lagan", o.lagan, "--data", s["data_dir"], "--seed", str(seed)]
    cmd += ["--steps", str(s["steps"]), "--samples", str(s["eval_samples"]), "--out", str(out)]
    cmd += ["--lookahead"] if ctx.protocol["arms"][arm]["lookahead"] else []
    ctx.log(f"reference {arm} seed {seed}: {' '.join(cmd)}")
    if subprocess.run(cmd, check=False).returncode:
      raise SystemExit(f"error: the reference run {arm} seed {seed} failed")
  with np.load(out) as f:
    meta, samples = json.loads(str(f["meta"])), f["g_ema"]
  fid = float(lookahead_study.image_evaluator(config)(samples)["fid"])
  scorer = _classifier_cache.cached_identity(config.dataset, config.classifier.cache_dir or None)
  ctx.log(f"reference {arm} seed {seed}: FID {fid:.2f} (cpu {meta['cpu_s']:.0f} s)")
  return dict(
    steps=meta["steps"], fid=fid, cpu_s=meta["cpu_s"], classifier=scorer, torch=meta["torch"]
  )


def library_arm(ctx, arm: str, seeds: list[int]) -> list[dict]:
  """The library's runs of ``arm`` (``lookahead_study.run_arm``: its seeds vmapped, resumed
  from the checkpoint at its last evaluation, each evaluation's progress saved)."""
  from experiments.gan import lookahead_study

  def records(results) -> list[dict]:
    return [
      dict(
        system="library",
        arm=arm,
        seed=r["seed"],
        steps=r["steps"],
        fid=(r["curves"][-1] if r["curves"] else {}).get("ema/fid"),
        cpu_s=r["cpu_s_all_seeds"] / len(seeds),
        classifier=r["classifier"],
      )
      for r in results
    ]

  config, horizon = _config(ctx.protocol, arm), float(ctx.protocol["settings"]["ema_horizon_steps"])
  folder = ctx.runs / "library" / f"{arm}_s{'-'.join(map(str, seeds))}"
  save = lambda rs: ctx.save(records(rs))  # noqa: E731
  return records(lookahead_study.run_arm(config, seeds, folder, horizon, ctx.log, progress=save))


def _options(p) -> None:
  p.add_argument("--lagan", help="run: a checkout of the reference (bb7c80e)")
  p.add_argument("--python", help="run: an interpreter with PyTorch")


def _check(o) -> str | None:
  """The one line of a bad option of ``run``, or ``None``."""
  if not o.lagan or not o.python:
    return f"lagan_outcome: run needs --lagan and --python (given: {o.lagan}, {o.python})"
  version = json.loads(Path(o.protocol).read_text())["version"] if Path(o.protocol).is_file() else 0
  if STATUS.get(version) and not o.trial:
    return (
      f"lagan_outcome: --protocol {o.protocol}: version {version} is not run: {STATUS[version]}"
    )
  return None


def _study(**side):
  return study.Study(
    protocol=_report.REPO / protocol_file(CURRENT),
    results=_report.REPO / "experiments/parity/results/lagan_outcome.v{version}.json",
    runs="runs/lagan_outcome_v{version}",
    blocks=("parity_lagan_outcome_v2", "parity_lagan_outcome"),
    header=lambda ctx, runs: {"protocol": protocol_file(ctx.protocol["version"])},
    sort_key=lambda p, r: (r["system"], list(p["arms"]).index(r["arm"]), r["seed"]),
    options=_options,
    check=_check,
    **side,
  )


# The two sides in one results file: the reference's runs first (one torch thread, little
# memory), each (arm, seed) a process; then the library's, an arm's seeds vmapped.
REFERENCE = _study(run_one=reference_seed, tag={"system": "reference"}, order="arm")
LIBRARY = _study(
  run_one=library_arm,
  tag={"system": "library"},
  batch=True,
  done=lambda ctx, r: r["steps"] >= ctx.protocol["settings"]["steps"],
)


def main(argv=None) -> int:
  """``run`` (the reference's side, then the library's) or ``report``."""
  if study.parse(REFERENCE, argv).command == "run":
    study.main(REFERENCE, argv)
  return study.main(LIBRARY, argv)


# -- the report -------------------------------------------------------------------------


def verdicts(protocol: dict, runs: list[dict]) -> list[dict]:
  """Per arm with at least two finished runs on each side: the TOST of log FID (library
  vs reference) at the protocol's margin, Holm over the arms, and the verdict."""
  from experiments import stats

  pr, horizon = protocol["primary"], protocol["settings"]["steps"]
  margin = math.log(pr["margin_ratio"])
  out = []
  for arm in protocol["arms"]:
    fids = {
      s: [r["fid"] for r in runs if r["arm"] == arm and r["system"] == s and r["steps"] == horizon]
      for s in SYSTEMS
    }
    if min(len(v) for v in fids.values()) >= 2:
      r = stats.tost(*(np.log(fids[s]) for s in SYSTEMS), margin=margin, alpha=pr["alpha"])
      out.append(dict(arm=arm, fids=fids, tost=r))
  # Holm over every registered arm, an arm not yet tested counted as p = 1
  raw = [o["tost"]["p"] for o in out] + [1.0] * (len(protocol["arms"]) - len(out))
  for o, p in zip(out, stats.holm(raw)):
    lo, hi = o["tost"]["ci95"]
    o["p_adjusted"] = p
    n = f"n = {len(o['fids']['library'])}/{len(o['fids']['reference'])}"
    if o["p_adjusted"] < pr["alpha"]:
      o["verdict"] = f"equivalent at margin {pr['margin_ratio']:g}x"
    elif lo > 0 or hi < 0:
      o["verdict"] = "different"
    else:
      o["verdict"] = f"inconclusive at {n}"
  return out


def outcome_lines(protocol: dict, data: dict | None, path: str = PROTOCOL_FILE) -> list[str]:
  """The block's lines from the protocol (its file ``path``) and the results JSON (``None``:
  no runs yet)."""
  from experiments import stats

  runs = list((data or {}).get("runs", []))
  horizon, n = protocol["settings"]["steps"], len(protocol["seeds"])
  labels = {a: spec["label"] for a, spec in protocol["arms"].items()}
  pr = protocol["primary"]
  lines = [
    f"Protocol `{path}`: {protocol['question']} Endpoint: {protocol['endpoint']}. "
    f"Test: {pr['test_description']}",
    "",
    "| arm | system | runs at step "
    + f"{horizon} (of {n}) | FID of the EMA generator (every seed) |"
    " geometric mean | CPU-hours per run |",
    "|---|---|---|---|---|---|",
  ]
  for arm in protocol["arms"]:
    for s in SYSTEMS:
      rs = sorted(
        (r for r in runs if r["arm"] == arm and r["system"] == s), key=lambda r: r["seed"]
      )
      done = [r for r in rs if r["steps"] == horizon]
      fids = [r["fid"] for r in done]
      gm = f"{math.exp(np.mean(np.log(fids))):.1f}" if fids else "-"
      cpu = f"{np.mean([r['cpu_s'] for r in done]) / 3600:.1f}" if done else "-"
      partial = [f"s{r['seed']} at step {r['steps']}" for r in rs if r["steps"] < horizon]
      count = f"{len(done)}" + (f" ({', '.join(partial[:1])}, ...)" if partial else "")
      lines.append(
        f"| {labels[arm]} | {s} | {count} | {stats.fmt_values(fids) if fids else '-'} | {gm} "
        f"| {cpu} |"
      )
  if runs:
    lines += _report.scorer_lines(
      _report.one_scorer(runs, lambda r: f"{r['system']} {r['arm']} s{r['seed']}")
    )
  lines += ["", "**Verdicts** (TOST of log FID, library vs reference; Holm over the arms):"]
  found = {o["arm"]: o for o in verdicts(protocol, runs)}
  for arm in protocol["arms"]:
    o = found.get(arm)
    if o is None:
      lines.append(f"- {labels[arm]}: not tested yet (fewer than two finished runs on a side).")
      continue
    t = o["tost"]
    lo, hi = (math.exp(x) for x in t["ci95"])
    lines.append(
      f"- {labels[arm]}: {o['verdict']}: FID ratio library / reference {math.exp(t['diff']):.3f} "
      f"(95% CI [{lo:.3f}, {hi:.3f}]), TOST p = {stats.fmt_p(o['p_adjusted'])} Holm-adjusted, "
      f"{stats.fmt_p(t['p'])} raw, n = {len(o['fids']['library'])}/{len(o['fids']['reference'])}."
    )
  return lines


def cpu_left(protocol: dict, runs: list[dict]) -> dict[tuple[str, str], float]:
  """Per (arm, system), the CPU-seconds still needed to bring every seed to the horizon.
  The library: its seeds train together, at the arm's rate so far (CPU-s per step, every
  seed) or, before its first evaluation, the protocol's measured rate. The reference: each
  unfinished run at the mean cost of the arm's finished ones or, before one finished, the
  protocol's measured rate (a reference run restarts from step 0)."""
  horizon, n = protocol["settings"]["steps"], len(protocol["seeds"])
  est = protocol["cpu_estimate"]
  left = {}
  for arm in protocol["arms"]:
    lib = [r for r in runs if r["arm"] == arm and r["system"] == "library"]
    step = min((r["steps"] for r in lib), default=0)
    spent = sum(r["cpu_s"] for r in lib)  # every seed's share of the vmapped program
    measured = est["library_cpu_s_per_1000_steps_5_seeds"]  # v2: per arm
    before = measured[arm] if isinstance(measured, dict) else measured
    rate = spent / step if step else before / 1000
    left[(arm, "library")] = rate * (horizon - step)
    done = [r["cpu_s"] for r in runs if r["arm"] == arm and r["system"] == "reference"]
    per_run = np.mean(done) if done else est["reference_cpu_s_per_1000_steps"] * horizon / 1000
    left[(arm, "reference")] = float(per_run) * (n - len(done))
  return left


def progress_lines(protocol: dict, runs: list[dict], status: str | None) -> list[str]:
  """The ``**Incomplete:**`` paragraph and a table of every arm's progress on each side
  (runs finished, the step reached, CPU-hours spent and left); ``[]`` when every run is at
  the horizon. ``status``: why the version is not run (``None``: it runs; else the one line
  says so)."""
  horizon, n = protocol["settings"]["steps"], len(protocol["seeds"])
  labels = {a: spec["label"] for a, spec in protocol["arms"].items()}
  left = cpu_left(protocol, runs)
  if not any(left.values()):
    return []
  if status is not None:  # superseded: not run, no CPU left
    return [f"**Incomplete:** {status}; it has no verdict.", ""]
  started = "started" if runs else "not started"
  status = (
    f"{started} and resumable (the reference's runs first, one process each; then the "
    f"library's, each arm's {n} seeds vmapped)"
  )
  lines = [
    f"**Incomplete:** {status}; a verdict is drawn for an arm once both sides have two or more "
    f"runs at step {horizon}. CPU-hours left, estimated from each side's rate so far (before "
    "its first run or evaluation: the rate measured before registration): "
    f"**{sum(left.values()) / 3600:.0f}**.",
    "",
    f"| arm | system | runs at step {horizon} (of {n}) | step reached | CPU-hours so far "
    "| CPU-hours left |",
    "|---|---|---|---|---|---|",
  ]
  for arm in protocol["arms"]:
    for s in SYSTEMS:
      rs = [r for r in runs if r["arm"] == arm and r["system"] == s]
      done = sum(r["steps"] == horizon for r in rs)
      # a reference run writes nothing before its end: no step to report
      step = min((r["steps"] for r in rs), default=0) if s == "library" else "-"
      cpu = sum(r["cpu_s"] for r in rs) / 3600
      lines.append(
        f"| {labels[arm]} | {s} | {done} | {step} | {cpu:.1f} | {left[(arm, s)] / 3600:.1f} |"
      )
  return lines + [""]


def block(version: int = CURRENT) -> str:
  """The block ``parity_lagan_outcome`` (v1) or ``parity_lagan_outcome_v<N>`` of
  ``docs/parity.md``."""
  path = protocol_file(version)
  protocol = _report.load_protocol(_report.REPO / path)
  results = results_file(version)
  data = json.loads(results.read_text()) if results.exists() else None
  lines = outcome_lines(protocol, data, path)
  runs = list((data or {}).get("runs", []))
  lines[2:2] = progress_lines(protocol, runs, STATUS[version])
  return "\n".join(lines)


def block_v1() -> str:
  return block(1)


def block_v2() -> str:
  return block(2)


_report.register("parity_lagan_outcome_v2", "docs/parity.md", f"{__name__}:block_v2")
_report.register("parity_lagan_outcome", "docs/parity.md", f"{__name__}:block_v1")

if __name__ == "__main__":
  raise SystemExit(main())
