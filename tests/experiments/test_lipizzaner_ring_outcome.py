"""Outcome parity on the ring (experiments/parity/lipizzaner_ring_*.py), without torch or runs:
the score added to the reference is the library's, the master's pick is read as it logs it,
the block regenerates from the committed JSON, and the verdict rule's three outcomes."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import study
from experiments.parity import lipizzaner_ring_entry as entry
from experiments.parity import lipizzaner_ring_run as lrr
from experiments.parity import lipizzaner_ring_tables as t
from minmaxlab.gan import data, metrics


def test_the_references_ring_score_is_the_librarys_mode_tvd():
  ring = data.ring8(2.0, 0.02)
  np.testing.assert_allclose(entry.ring_modes(np, 8, 2.0), np.asarray(ring.modes), atol=1e-6)
  rng = np.random.default_rng(0)
  modes = np.asarray(ring.modes, np.float64)
  x = modes[rng.integers(0, 3, 400)] + 0.03 * rng.standard_normal((400, 2))  # 3 modes, some HQ
  ours = entry.tvd_score(np, x, modes, 0.02)
  tvd = jax.jit(lambda s, w: metrics.mode_tvd_score(ring, s, w))  # one compile, not one per op
  lib = tvd(jnp.asarray(x[None], jnp.float32), jnp.ones(1))
  assert 0.3 < ours < 1.0
  np.testing.assert_allclose(ours, float(lib), atol=1e-6)


def test_final_mixture_is_the_node_the_master_logs_as_best(tmp_path):
  (tmp_path / "eval").mkdir()
  for port, score in ((5000, 0.5), (5004, 0.2)):
    np.savez(
      tmp_path / "eval" / f"127.0.0.1-{port}.npz",
      samples=np.full((3, 2), port, np.float32),
      score=score,
      sources=np.array(["127.0.0.1:5001"]),
      weights=np.array([1.0]),
    )
  (tmp_path / "master.log").write_text(
    "x INFO - lipizzaner_master - Best result: 127.0.0.1:5004 = (0.2, None)\n"
  )
  got = lrr.final_mixture(tmp_path)
  assert got["cell"] == 4 and got["score"] == 0.2 and got["node_scores"] == {"0": 0.5, "4": 0.2}
  assert np.all(got["samples"] == 5004)
  (tmp_path / "master.log").write_text("no line\n")
  with pytest.raises(RuntimeError, match="Best result"):
    lrr.final_mixture(tmp_path)


def test_verdict_rule_equivalent_different_inconclusive():
  same = t.compare([0.50, 0.52, 0.48, 0.51, 0.49], [0.50, 0.51, 0.49, 0.50, 0.50], 0.15, 0.05)
  assert same["verdict"] == "equivalent at margin 0.15" and same["tost_p"] < 0.05
  far = t.compare([0.10, 0.12, 0.11, 0.09, 0.13], [0.60, 0.62, 0.58, 0.61, 0.59], 0.15, 0.05)
  assert far["verdict"] == "different" and far["ci95"][1] < 0 and far["mw_p"] < 0.05
  wide = t.compare([0.1, 0.9, 0.3], [0.5, 0.2, 0.8], 0.15, 0.05)
  assert wide["verdict"] == "inconclusive at n = 3/3"
  flat = t.compare([2.0, 2.0], [2.0, 2.0], 1.5, 0.05)
  assert flat["verdict"].startswith("inconclusive") and flat["tost_p"] is None


def test_block_regenerates_from_the_committed_json_and_says_incomplete(tmp_path):
  protocol = json.loads(t.PROTOCOL.read_text())
  assert t._report.read_block(t.REPO / t.DOC, t.BLOCK) == t.block()
  rec = {"seed": 0, "mixture/modes_covered": 3, "mixture/high_quality_rate": 0.3, "cpu_seconds": 9}
  (tmp_path / "reference_off_s0.json").write_text(json.dumps(rec))
  text = t.block(t.PROTOCOL, tmp_path)
  n_off = len(protocol["arms"]["reference_off"]["seeds"])
  assert f"incomplete: 1 of {n_off}" in text and "**Incomplete:**" in text
  assert "| Lipizzaner's code, selection off | 1 of" in text


def test_a_client_whose_log_shows_a_traceback_stops_the_run(tmp_path):
  log = tmp_path / "client1.log"
  log.write_text("INFO started\n")
  lrr._raise_on_traceback(log, 1)  # a quiet log, and a missing one, pass
  lrr._raise_on_traceback(tmp_path / "client2.log", 2)
  log.write_text("INFO started\nTraceback (most recent call last):\n  ...\nFileExistsError: x\n")
  with pytest.raises(RuntimeError, match="client 1 raised"):
    lrr._raise_on_traceback(log, 1)


def test_the_command_line_names_a_bad_option_in_one_line(tmp_path):
  """The study runs on ``experiments.study``: its own options are checked before anything runs;
  a library arm is not a trial of ``measure``."""
  from experiments.parity import lipizzaner_ring_outcome as out

  missing = str(tmp_path / "nope")
  with pytest.raises(SystemExit) as e:
    out.main(["run", "--lipizzaner", missing])
  assert str(e.value.code) == f"lipizzaner_ring_outcome: --lipizzaner {missing}: not a checkout"
  with pytest.raises(SystemExit, match="--iterations 2: measure only"):
    out.main(["run", "--lipizzaner", str(tmp_path), "--iterations", "2"])
  with pytest.raises(SystemExit, match="--seeds 3: not a seed of"):
    out.main(["run", "--lipizzaner", str(tmp_path), "--seeds", "3", "--runs", missing])
  with pytest.raises(SystemExit, match="--arm library_whole: not a reference arm"):
    out.main(["measure", "--lipizzaner", str(tmp_path), "--arm", "library_whole"])
  assert not Path(missing).exists()
  assert out.STUDY.blocks == (t.BLOCK, t.BLOCK_V3, t.BLOCK_V4)
  # v4's results folder and work folders, by the protocol's version
  o = study.parse(out.STUDY, ["run", "--lipizzaner", str(tmp_path)])
  results, runs = study.where(out.STUDY, o, json.loads(out.PROTOCOL.read_text()))
  assert results == t.RESULTS_V4 and runs.name == "lipizzaner_ring_outcome_v4"
