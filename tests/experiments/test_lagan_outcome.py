"""The outcome-parity study of Lookahead-minmax (``experiments/parity/lagan_outcome.py``) and
the progress of Lookahead v3/v4 (``experiments/gan/lookahead_v3.py``): their reports from
synthetic result records (no jax program, no torch), and which version runs with what."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from experiments import _report
from experiments.gan import lookahead_v3
from experiments.parity import lagan_outcome as lo

PROTOCOL = _report.load_protocol(_report.REPO / lo.PROTOCOL_FILE)
H = PROTOCOL["settings"]["steps"]


def _runs(arm, library, reference, steps=H):
  out = []
  for system, fids in (("library", library), ("reference", reference)):
    out += [
      dict(system=system, arm=arm, seed=i, steps=steps, fid=f, cpu_s=1.0, classifier=None)
      for i, f in enumerate(fids)
    ]
  return out


BASE = [30.0, 31.0, 29.5, 30.5, 30.2]


@pytest.mark.parametrize(
  "library, verdict",
  [
    (BASE, "equivalent at margin 1.15x"),  # the same values on both sides
    ([1.5 * f for f in BASE], "different"),
    ([f * s for f, s in zip(BASE, (0.6, 1.6, 0.7, 1.5, 1.0))], "inconclusive at n = 5/5"),
  ],
)
def test_each_verdict_of_the_registered_rule(library, verdict):
  runs = _runs("alt", library, BASE) + _runs("la_alt_k1000", BASE, BASE)
  found = {o["arm"]: o for o in lo.verdicts(PROTOCOL, runs)}
  assert found["alt"]["verdict"] == verdict
  assert found["la_alt_k1000"]["verdict"] == "equivalent at margin 1.15x"
  ratio = math.exp(found["alt"]["tost"]["diff"])
  assert ratio == pytest.approx(math.exp(np.mean(np.log(library)) - np.mean(np.log(BASE))))


def test_unfinished_runs_are_not_tested_and_count_as_p_one_in_holm():
  runs = _runs("alt", BASE, BASE) + _runs("la_alt_k1000", BASE, BASE, steps=H - 1000)
  (only,) = lo.verdicts(PROTOCOL, runs)
  assert only["arm"] == "alt" and only["p_adjusted"] == pytest.approx(min(1, 2 * only["tost"]["p"]))
  lines = "\n".join(lo.outcome_lines(PROTOCOL, {"runs": runs}))  # as the study runner writes
  assert "LA-AltGAN k=1000: not tested yet" in lines


def test_lookahead_v3_cpu_left_uses_each_arm_rate_else_the_measured_one():
  protocol = _report.load_protocol(_report.REPO / lookahead_v3.PROTOCOL_FILE)
  horizon = protocol["settings"]["steps"]
  by_arm = {"alt": [dict(seed=s, steps=4000, cpu_s_all_seeds=8000.0) for s in range(10)]}
  left = lookahead_v3.cpu_left(protocol, by_arm)
  assert left["alt"] == pytest.approx(2.0 * (horizon - 4000))
  measured = protocol["cpu_estimate"]["cpu_s_per_1000_steps_all_seeds"]["extragradient"]
  assert left["eg"] == pytest.approx(measured * horizon / 1000)
  v4 = _report.load_protocol(_report.REPO / lookahead_v3.VERSIONS[4][0])
  left = lookahead_v3.cpu_left(v4, by_arm)
  assert left["alt"] == pytest.approx(2.0 * (horizon - 4000))
  lines = lookahead_v3.progress_lines(v4, by_arm)
  assert lines[0].startswith("**Incomplete:** started and resumable")
  assert f"**{sum(left.values()) / 3600:.0f}**" in lines[0]
  assert "| AltGAN | 0,1,2,3,4,5,6,7,8,9 | 4000 | 2.2 | 53.3 |" in "\n".join(lines)


def test_lookahead_v4_block_starts_not_started_with_the_measured_rate():
  path, _ = lookahead_v3.VERSIONS[4]
  protocol = _report.load_protocol(_report.REPO / path)
  horizon = protocol["settings"]["steps"]
  measured = protocol["cpu_estimate"]["cpu_s_per_1000_steps_all_seeds"]
  left = lookahead_v3.cpu_left(protocol, {})
  assert left == {a: pytest.approx(measured[a] * horizon / 1000) for a in protocol["arms"]}
  assert sum(left.values()) / 3600 == pytest.approx(
    protocol["cpu_estimate"]["total_cpu_hours"], 1e-3
  )
  lines = lookahead_v3.progress_lines(protocol, {})
  assert lines[0].startswith("**Incomplete:** not started and resumable")
  assert f"**{sum(left.values()) / 3600:.0f}**" in lines[0] and "at least" not in lines[0]
  v3 = _report.load_protocol(_report.REPO / lookahead_v3.PROTOCOL_FILE)
  (line, _) = lookahead_v3.progress_lines(v3, {})
  assert line.startswith("**Incomplete:** superseded by v4") and "CPU-hours" not in line


def test_lagan_outcome_v2_progress_and_cpu_hours_left():
  protocol = _report.load_protocol(_report.REPO / lo.protocol_file(2))
  horizon, n, est = protocol["settings"]["steps"], len(protocol["seeds"]), protocol["cpu_estimate"]
  lib = dict(system="library", arm="alt", steps=4000, fid=40.0, cpu_s=100.0, classifier=None)
  runs = [dict(lib, seed=s) for s in protocol["seeds"]]
  runs.append(dict(lib, system="reference", seed=0, steps=horizon, cpu_s=10000.0))
  left = lo.cpu_left(protocol, runs)
  assert left[("alt", "library")] == pytest.approx(n * 100.0 / 4000 * (horizon - 4000))
  assert left[("alt", "reference")] == pytest.approx(10000.0 * (n - 1))
  per_run = est["reference_cpu_s_per_1000_steps"] * horizon / 1000
  assert left[("la_alt_k1000", "reference")] == pytest.approx(per_run * n)
  lib_all = est["library_cpu_s_per_1000_steps_5_seeds"]["la_alt_k1000"] * horizon / 1000
  assert left[("la_alt_k1000", "library")] == pytest.approx(lib_all)
  lines = lo.progress_lines(protocol, runs, lo.STATUS[2])
  assert lines[0].startswith("**Incomplete:** started and resumable")
  v1 = lo.progress_lines(protocol, runs, lo.STATUS[1])
  assert v1 == [f"**Incomplete:** {lo.STATUS[1]}; it has no verdict.", ""]
  assert f"**{sum(left.values()) / 3600:.0f}**" in lines[0]
  assert "| AltGAN | library | 0 | 4000 | 0.1 |" in "\n".join(lines)
  assert "| AltGAN | reference | 1 | - | 2.8 |" in "\n".join(lines)
  done = [
    dict(r, system=s, arm=a, steps=horizon)
    for r in runs[:n]
    for s in lo.SYSTEMS
    for a in protocol["arms"]
  ]
  assert lo.progress_lines(protocol, done, None) == []


def test_lagan_outcome_v2_configures_the_notebooks_networks_and_draws_and_v1_is_not_run():
  from experiments.gan import lookahead_study

  protocol = _report.load_protocol(_report.REPO / lo.protocol_file(2))
  assert lo.PROTOCOL_FILE == lo.protocol_file(2) and lo.CURRENT == 2
  spec = {k: v for k, v in protocol["arms"]["la_alt_k1000"].items() if k != "label"}
  config = lookahead_study.study_config("la_alt_k1000", 0, lo._args(protocol), spec)
  assert (config.architecture, config.optimizer) == ("dcgan_notebook", "notebook")
  assert config.latent_draws == "per_player" and config.num_steps == 20000
  v1 = _report.load_protocol(_report.REPO / lo.protocol_file(1))
  for key in ("seeds", "primary", "arms"):  # v2 changes the library side's operators only
    assert protocol[key] == v1[key], key
  assert protocol["settings"]["steps"] == v1["settings"]["steps"]
  with pytest.raises(SystemExit) as e:
    v1_file = str(_report.REPO / lo.protocol_file(1))
    lo.main(["run", "--protocol", v1_file, "--lagan", "x", "--python", "y"])
  assert "version 1 is not run: superseded by v2" in str(e.value) and "\n" not in str(e.value)
  with pytest.raises(SystemExit, match="run needs --lagan and --python"):
    lo.main(["run", "--python", "y"])


def test_run_checks_the_registration_before_anything(tmp_path, monkeypatch):
  """``lagan_outcome run`` (the study runner) starts with ``registration.start`` on its
  protocol (a dirty tree or an edited protocol is refused there, in one line) and writes
  nothing first."""
  from experiments import registration

  seen = []

  def refuse(path, trial=False, **where):
    seen.append((Path(path), trial))
    raise registration.Refused("protocol changed since its registration")

  monkeypatch.setattr(registration, "start", refuse)
  out, runs = tmp_path / "out.json", tmp_path / "runs"
  argv = ["run", "--lagan", str(tmp_path), "--python", "python3", "--out", str(out)]
  with pytest.raises(registration.Refused, match="protocol changed"):
    lo.main([*argv, "--runs", str(runs)])
  assert seen == [(_report.REPO / lo.protocol_file(lo.CURRENT), False)]
  assert not out.exists() and not runs.exists()
