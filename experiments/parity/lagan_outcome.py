r"""Outcome parity of Lookahead-minmax (``protocols/lagan_outcome.v1.json``, pre-registered):
the reference's MNIST-notebook protocol on Fashion-MNIST through both systems, AltGAN and
LA-AltGAN (k = 1000), the same seeds on each side, both sides' generator samples scored by
ONE classifier (the library's evaluation classifier), the endpoint classifier-FID of the
EMA generator compared with two one-sided tests (``experiments.stats.tost``) at the
protocol's margin.

  python -m experiments.parity.lagan_outcome run --lagan PATH --python /work/refvenv/bin/python
  python -m experiments._report          # the block parity_lagan_outcome of docs/parity.md

``run`` starts only through the registration tool (``experiments.registration``) and runs
the reference's runs first (one torch thread, little memory), then the library's. It is
resumable: the library's arms resume from their checkpoint at the last evaluation
(``lookahead_study.run_arm``), a reference run is one process that writes its samples
atomically at the end (``lagan_outcome_driver.py``), so a finished run is never redone and
an interrupted one starts again. Every finished run is scored at once and written to
``results/lagan_outcome.v1.json`` with the library side's progress.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import types
from pathlib import Path

import numpy as np

from experiments import _report  # the report needs neither jax nor torch

PROTOCOL_FILE = "experiments/parity/protocols/lagan_outcome.v1.json"
RESULTS = _report.REPO / "experiments" / "parity" / "results" / "lagan_outcome.v1.json"
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


def _save(data: dict) -> None:
  """Write ``data`` to the results JSON it was read from (``data["_out"]``)."""
  out = Path(data["_out"])
  out.parent.mkdir(parents=True, exist_ok=True)
  with _report.results_lock(out):
    _report.write_json(out, {k: v for k, v in data.items() if k != "_out"}, compact=False)


def _library(protocol, arm, spec, data, runs_dir, log) -> None:
  from experiments.gan import lookahead_study

  seeds, args = protocol["seeds"], _args(protocol)
  config = lookahead_study.study_config(arm, seeds[0], args, spec)
  horizon = float(protocol["settings"]["ema_horizon_steps"])

  def record(results):
    for r in results:
      last = r["curves"][-1] if r["curves"] else {}
      data["runs"][f"library/{arm}/{r['seed']}"] = dict(
        system="library",
        arm=arm,
        seed=r["seed"],
        steps=r["steps"],
        fid=last.get("ema/fid"),
        cpu_s=r["cpu_s_all_seeds"] / len(seeds),
        classifier=r["classifier"],
      )
    _save(data)

  folder = Path(runs_dir) / "library" / f"{arm}_s{'-'.join(map(str, seeds))}"
  record(lookahead_study.run_arm(config, seeds, folder, horizon, log, progress=record))


def _reference(protocol, arm, spec, data, runs_dir, lagan, python, log) -> None:
  from experiments import _classifier_cache
  from experiments.gan import lookahead_study

  s = protocol["settings"]
  config = lookahead_study.study_config(arm, protocol["seeds"][0], _args(protocol), spec)
  for seed in protocol["seeds"]:
    key = f"reference/{arm}/{seed}"
    if key in data["runs"]:
      continue
    out = Path(runs_dir) / "reference" / f"{arm}_s{seed}.npz"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
      cmd = [python, str(DRIVER), "--lagan", lagan, "--data", s["data_dir"], "--seed", str(seed)]
      cmd += ["--steps", str(s["steps"]), "--samples", str(s["eval_samples"]), "--out", str(out)]
      cmd += ["--lookahead"] if spec["lookahead"] else []
      log(f"reference {arm} seed {seed}: {' '.join(cmd)}")
      if subprocess.run(cmd, check=False).returncode:
        raise SystemExit(f"error: the reference run {arm} seed {seed} failed")
    with np.load(out) as f:
      meta, samples = json.loads(str(f["meta"])), f["g_ema"]
    m = lookahead_study.image_evaluator(config)(samples)
    scorer = _classifier_cache.cached_identity(config.dataset, config.classifier.cache_dir or None)
    data["runs"][key] = dict(
      system="reference",
      arm=arm,
      seed=seed,
      steps=meta["steps"],
      fid=float(m["fid"]),
      cpu_s=meta["cpu_s"],
      classifier=scorer,
      torch=meta["torch"],
    )
    _save(data)
    log(f"reference {arm} seed {seed}: FID {m['fid']:.2f} (cpu {meta['cpu_s']:.0f} s)")


def run(argv=None) -> None:
  from experiments import registration

  p = argparse.ArgumentParser(description="run (or resume) the LAGAN outcome-parity study")
  p.add_argument("--lagan", required=True, help="a checkout of the reference (bb7c80e)")
  p.add_argument("--python", required=True, help="an interpreter with PyTorch")
  p.add_argument("--runs", default="runs/lagan_outcome")
  p.add_argument("--out", default=str(RESULTS), help="the results JSON (from a worktree: main's)")
  p.add_argument("--trial", action="store_true", help="a smoke run: registration not checked")
  a = p.parse_args(argv)
  reg = registration.start(_report.REPO / PROTOCOL_FILE, trial=a.trial)
  protocol = _report.load_protocol(_report.REPO / PROTOCOL_FILE)
  data = json.loads(Path(a.out).read_text()) if Path(a.out).exists() else {"runs": {}}
  data.update(
    protocol=PROTOCOL_FILE, registration=registration.merge(data.get("registration"), reg)
  )
  data["_out"] = a.out
  log = lambda s: print(s, flush=True)  # noqa: E731
  arms = {
    arm: {k: v for k, v in spec.items() if k != "label"} for arm, spec in protocol["arms"].items()
  }
  for arm, spec in arms.items():  # the reference first: one torch thread, little memory
    _reference(protocol, arm, spec, data, a.runs, a.lagan, a.python, log)
  for arm, spec in arms.items():
    _library(protocol, arm, spec, data, a.runs, log)


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


def outcome_lines(protocol: dict, data: dict | None) -> list[str]:
  """The block's lines from the protocol and the results JSON (``None``: no runs yet)."""
  from experiments import stats

  runs = list((data or {}).get("runs", {}).values())
  horizon, n = protocol["settings"]["steps"], len(protocol["seeds"])
  labels = {a: spec["label"] for a, spec in protocol["arms"].items()}
  pr = protocol["primary"]
  lines = [
    f"Protocol `{PROTOCOL_FILE}`: {protocol['question']} Endpoint: {protocol['endpoint']}. "
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


def block() -> str:
  """The block ``parity_lagan_outcome`` of ``docs/parity.md``."""
  protocol = _report.load_protocol(_report.REPO / PROTOCOL_FILE)
  data = json.loads(RESULTS.read_text()) if RESULTS.exists() else None
  lines = outcome_lines(protocol, data)
  if data is None:
    where = RESULTS.relative_to(_report.REPO)
    lines.insert(2, f"**Incomplete:** no run has finished yet (`{where}` is not there).\n")
  return "\n".join(lines)


_report.register("parity_lagan_outcome", "docs/parity.md", f"{__name__}:block")

if __name__ == "__main__":
  if sys.argv[1:2] != ["run"]:
    sys.exit("usage: python -m experiments.parity.lagan_outcome run --lagan PATH --python PYTHON")
  run(sys.argv[2:])
