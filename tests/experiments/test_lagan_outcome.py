"""The outcome-parity study of Lookahead-minmax (``experiments/parity/lagan_outcome.py``) and
the progress of Lookahead v3 (``experiments/gan/lookahead_v3.py``): their reports from
synthetic result records (no jax program, no torch)."""

from __future__ import annotations

import math

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
  lines = "\n".join(lo.outcome_lines(PROTOCOL, {"runs": {str(i): r for i, r in enumerate(runs)}}))
  assert "LA-AltGAN k=1000: not tested yet" in lines


def test_lookahead_v3_cpu_left_uses_each_arm_rate_else_the_measured_one():
  protocol = _report.load_protocol(_report.REPO / lookahead_v3.PROTOCOL_FILE)
  horizon = protocol["settings"]["steps"]
  by_arm = {"alt": [dict(seed=s, steps=4000, cpu_s_all_seeds=8000.0) for s in range(10)]}
  left = lookahead_v3.cpu_left(protocol, by_arm)
  assert left["alt"] == pytest.approx(2.0 * (horizon - 4000))
  measured = protocol["cpu_estimate"]["cpu_s_per_1000_steps_all_seeds"]["extragradient"]
  assert left["eg"] == pytest.approx(measured * horizon / 1000)
  lines = lookahead_v3.progress_lines(protocol, by_arm)
  assert (
    lines[0].startswith("**Incomplete:**")
    and f"**at least {sum(left.values()) / 3600:.0f}**" in lines[0]
  )
