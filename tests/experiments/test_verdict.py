"""The main job's verdict line (experiments/coevolution/compare.py) names a difference only
from the threshold it states, else "no meaningful difference on one seed", and points to the
study over seeds; the thresholds are what the committed studies' JSON gives."""

import json
import math
import statistics
from pathlib import Path

from experiments.coevolution import compare

ROOT = Path(__file__).resolve().parents[2]


def _ring(modes, hq):
  return {"mixture/modes_covered": modes, "mixture/high_quality_rate": hq}


def test_a_small_difference_is_no_meaningful_difference():
  # the run: grid 84% vs one GAN 83% high-quality, one mode apart
  line = compare.verdict(_ring(3, 0.84), _ring(2, 0.83))
  assert line.startswith("verdict: no meaningful difference on one seed; see the study (")
  assert "table ring_v1 of experiments/coevolution/README.md" in line
  assert "modes (grid 3/8 vs one GAN 2/8, a difference counts from 3 modes)" in line
  assert "high-quality rate (grid 84% vs one GAN 83%, a difference counts from 20 points)" in line
  assert "ahead" not in line


def test_a_difference_past_its_threshold_is_named_with_the_threshold():
  line = compare.verdict(_ring(3, 0.09), _ring(3, 0.86))  # --config.generations=12
  assert line.startswith(
    "verdict (one seed): one GAN ahead on high-quality rate (grid 9% vs one GAN 86%,"
    " a difference counts from 20 points); no meaningful difference in modes (grid 3/8 vs"
    " one GAN 3/8, a difference counts from 3 modes); over seeds see the ring study"
  )
  assert compare.verdict(_ring(6, 0.5), _ring(3, 0.5)).startswith(
    "verdict (one seed): grid ahead on modes (grid 6/8 vs one GAN 3/8"
  )
  # exactly at the threshold counts; just under it does not
  assert "ahead on high-quality" in compare.verdict(_ring(3, 0.60), _ring(3, 0.80))
  assert "ahead" not in compare.verdict(_ring(3, 0.61), _ring(3, 0.80))
  images = {"mixture/fid": 50.0, "mixture/class_tvd": 0.2}
  line = compare.verdict(images, {"mixture/fid": 64.0, "mixture/class_tvd": 0.22})
  assert line.startswith("verdict (one seed): grid ahead on classifier-FID (grid 50.0 vs one GAN")
  assert "no meaningful difference in class TVD" in line and "lipizzaner_grids_v2" in line
  assert compare.verdict({}, {}) == "verdict: not evaluated"


def _final_sd(runs, metric):
  return statistics.stdev(metric(r) for r in runs)


def test_thresholds_are_twice_the_plain_gans_spread_between_seeds_rounded_up():
  ring = json.loads((ROOT / "experiments/coevolution/results/ring_v1.json").read_text())
  plain = [r for r in ring["runs"] if r["arm"] == "plain_gan"]
  grids = json.loads(
    (ROOT / "experiments/coevolution/results/v2/lipizzaner_grids.json").read_text()
  )
  lone = [r for r in grids["runs"] if r["grid"] == "plain_gan"]
  assert len(plain) == 10 and len(lone) == 6
  spread = {
    "mixture/modes_covered": (_final_sd(plain, lambda r: r["mixture/modes_covered"]), 1),
    "mixture/high_quality_rate": (_final_sd(plain, lambda r: r["mixture/high_quality_rate"]), 0.01),
    "mixture/fid": (_final_sd(lone, lambda r: r["curves"][-1]["fid"]), 1),
    "mixture/class_tvd": (_final_sd(lone, lambda r: r["curves"][-1]["class_tvd"]), 0.01),
  }
  for rows in compare._VERDICT_METRICS.values():
    for key, *_, threshold, _words in rows:
      sd, unit = spread[key]
      assert threshold == math.ceil(round(2 * sd / unit, 6)) * unit, (key, sd)


def test_metrics_png_panels_are_titled_in_words_with_a_direction(tmp_path, monkeypatch):
  import matplotlib.figure

  from experiments.coevolution import train
  from minmaxlab import runner

  directions = ("is better", "no better direction", "no direction", "more:", "is faster")
  for key, title in train.CURVE_TITLES.items():
    assert any(d in title for d in directions), key
  seen = []
  save = matplotlib.figure.Figure.savefig
  monkeypatch.setattr(
    matplotlib.figure.Figure,
    "savefig",
    lambda self, *a, **k: (seen.extend(ax.get_title() for ax in self.axes), save(self, *a, **k)),
  )
  rows = [
    {"generation": g, "mixture/modes_covered": g, "g_loss": 0.5, "other": 1.0} for g in (1, 2)
  ]
  keys = ["mixture/modes_covered", "g_loss", "other"]
  runner.save_metric_curves(tmp_path / "m.png", rows, keys, titles=train.CURVE_TITLES)
  assert seen == [
    "modes covered by the best mixture, of 8 (higher is better)",
    "generator loss (no better direction in a game)",
    "other",  # no title given: the key
  ]
  assert (tmp_path / "m.png").stat().st_size > 1000
