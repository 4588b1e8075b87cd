"""The pre-registered ring study (``experiments.coevolution.ring_study``, issue 34c): the arms
run with the operators the protocol registers (the reference coupling: selection off,
neighbourhood opponents, no mutation; the plain GAN: one GAN with 9x the steps and every
operator off), the table gives every seed and the Holm-corrected verdicts, and the earlier
issue-18 tables are generated from their JSON with sample standard deviations."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import _report
from experiments.coevolution import ring_issue18, ring_tables
from experiments.coevolution import ring_study as rs
from experiments.coevolution.experiment import coevolution_config


@pytest.fixture(scope="module")
def protocol():
  return rs.load_protocol()


def test_protocol_arms_and_seeds(protocol):
  assert list(protocol["arms"]) == ["reference", "selection", "plain_gan"]
  assert protocol["seeds"] == list(range(10))
  pr = protocol["primary"]
  assert pr["test"] == "mann_whitney" and pr["alternative"] == "two-sided"
  assert pr["correction"] == "holm" and len(pr["comparisons"]) * len(pr["metric"]) == 6


def test_arm_configs_have_the_registered_operators(protocol):
  ref, sel, plain = (
    rs.arm_config(protocol, arm, seed=3) for arm in ("reference", "selection", "plain_gan")
  )
  cr, cs, cp = (coevolution_config(c) for c in (ref, sel, plain))
  # the reference coupling: selection off, neighbourhood opponents, nothing else evolutionary
  assert (cr.rows, cr.cols) == (3, 3) and not cr.selection
  assert cr.opponents == "neighbourhood" and cr.mutation_probability == 0.0
  assert cr.mutation_scale == 0.0 and cr.n_replacements == 0
  # selection: ring8_3x3's tournament, replacement and mutation
  assert cs.selection and cs.tournament_size == 2 and cs.n_replacements == 1
  assert cs.generator_selection == "tournament" and cs.opponents == "selected"
  assert cs.mutation_probability == 0.5 and cs.mutation_scale == 1e-4
  # the plain GAN: one GAN, the grid's total steps, every operator off
  assert (cp.rows, cp.cols) == (1, 1) and not cp.selection
  assert cp.steps_per_generation == 9 * cr.steps_per_generation == 9 * cs.steps_per_generation
  assert cp.mutation_probability == 0.0 and cp.n_replacements == 0
  assert cp.opponents == "selected"
  # everything else the same on all three sides (model, optimizer, data, generations, seed)
  skip = {
    "rows",
    "cols",
    "steps_per_generation",
    "selection",
    "opponents",
    "n_replacements",
    "mutation_probability",
    "mutation_scale",
  }
  for c in (sel, plain):
    for k in ref:
      if k not in skip:
        assert c[k] == ref[k], k
  assert ref.seed == 3 and ref.generations == 40 and ref.dataset == "ring8"


@pytest.mark.slow  # two arms' generation programs compiled
def test_reference_and_plain_gan_keep_their_learning_rates(tmp_path, protocol):
  """One tiny generation of the reference arm and of the plain GAN: no cell's learning rate
  moved (mutation off), every trained individual was kept (no replacement test), the plain
  GAN's mixture is its one generator."""
  p = json.loads(json.dumps(protocol))
  p["common"].update(generations=1, eval_every=1, checkpoint_every=1)
  p["common"]["flat_params"] = True  # one vector per network: smaller programs to compile
  for arm, steps in (("reference", 2), ("selection", 2), ("plain_gan", 18)):
    p["arms"][arm]["overrides"]["steps_per_generation"] = steps
  p["seeds"] = [0]
  path = tmp_path / "protocol.json"
  path.write_text(json.dumps(p))
  out = tmp_path / "ring.json"
  argv = ["run", "--trial", "--protocol", str(path), "--runs", str(tmp_path / "runs")]
  rs.main([*argv, "--out", str(out), "--arms", "reference,plain_gan"])
  data = json.loads(out.read_text())
  assert [r["arm"] for r in data["runs"]] == ["reference", "plain_gan"]
  for r in data["runs"]:
    jsonl = (tmp_path / "runs" / f"{r['arm']}_s0" / "metrics.jsonl").read_text()
    rows = [json.loads(x) for x in jsonl.splitlines()]
    lr = np.asarray(rows[-1]["cells/lr_g"] + rows[-1]["cells/lr_d"], float)
    np.testing.assert_array_equal(lr, np.float32(1e-3))  # held in float32
    cells = 9 if r["arm"] == "reference" else 1
    assert r["replaced_g"] == r["replaced_d"] == cells  # selection off: trained ones kept
    assert r["operators"]["mutation_probability"] == 0.0
    assert r["cpu_seconds"] > 0 and r["wall_seconds"] > 0
  assert data["runs"][1]["mixture/weights"][0] == 1.0
  assert data["runs"][1]["cells/modes_covered"] == [[data["runs"][1]["grid/modes_covered"]]]


def _fake(protocol, values, missing=()):
  runs = []
  for arm, (modes, hq) in values.items():
    for seed, (m, h) in enumerate(zip(modes, hq)):
      if (arm, seed) in missing:
        continue
      cells = [[m]] if arm == "plain_gan" else [[m, 1, 1], [1, 1, 1], [1, 1, 1]]
      runs.append(
        {
          "arm": arm,
          "seed": seed,
          "mixture/modes_covered": m,
          "mixture/high_quality_rate": h,
          "mixture/mode_kl": 0.5,
          "grid/modes_covered": m,
          "grid/high_quality_rate": h,
          "cells/modes_covered": cells,
          "wall_seconds": 30.0,
          "cpu_seconds": 20.0,
        }
      )
  return {
    "protocol": "experiments/coevolution/protocols/ring.v1.json",
    "commit": "abc1234",
    "host": {"cpu": "test CPU", "cpus": 2, "jax": "0"},
    "runs": runs,
  }


def test_table_every_seed_and_holm_verdicts(protocol):
  hi, lo = [8] * 10, [2, 3, 2, 3, 2, 3, 2, 3, 2, 3]
  sharp, blurred = [0.9] * 10, [0.1 + 0.01 * i for i in range(10)]
  data = _fake(
    protocol,
    {"reference": (lo, blurred), "selection": (lo, sharp), "plain_gan": (hi, sharp)},
  )
  text = ring_tables.table(protocol, data)
  lines = text.splitlines()
  assert any(line.startswith("| 9 | 3 | 0.190 | 3 | 0.900 | 8 | 0.900 |") for line in lines)
  verdict_part, endpoints = text.split("**Registered endpoints**")
  verdicts = [line for line in verdict_part.splitlines() if line.startswith("- ")]
  assert len(verdicts) == 6
  # every registered endpoint listed after them: the primary and the six secondary ones
  listed = [line for line in endpoints.splitlines() if line.startswith("- ")]
  assert [x.split(":")[0] for x in listed] == ["- Primary"] + [
    f"- Secondary {i}" for i in range(1, 7)
  ]
  # modes: the plain GAN beats both grids (every value above), the two grids tie exactly
  assert verdicts[0].startswith("- plain GAN beats reference coupling on modes covered (of 8)")
  assert verdicts[1].startswith("- plain GAN beats selection on modes covered")
  assert verdicts[2].startswith("- No difference detected at n = 10/10: reference coupling 2.5")
  # HQ: the reference loses to both; selection and the plain GAN are identical
  assert verdicts[3].startswith("- plain GAN beats reference coupling on high-quality rate")
  assert verdicts[4].startswith("- No difference detected at n = 10/10: selection 0.90")
  assert verdicts[5].startswith("- selection beats reference coupling on high-quality rate")
  # the sentence carries the Holm-adjusted p, the raw one follows
  from experiments import stats

  raw = stats.mann_whitney(hi, lo)
  adj = stats.holm([raw, raw, 1.0, raw, 1.0, raw])[0]
  assert f"Mann-Whitney p = {stats.fmt_p(adj)}" in verdicts[0]
  assert verdicts[0].endswith(f"Raw p = {stats.fmt_p(raw)}.")
  assert "Holm-adjusted over the 6 primary tests" in text
  assert "Incomplete" not in text
  assert "| mean ± sd | 2.5 ± 0.5 |" in text  # the sample std (0.53; population: 0.50)


def test_table_says_when_runs_are_missing(protocol):
  v = ([8] * 10, [0.9] * 10)
  data = _fake(
    protocol,
    {"reference": v, "selection": v, "plain_gan": v},
    missing={("plain_gan", s) for s in range(4, 10)},
  )
  text = ring_tables.table(protocol, data)
  assert "**Incomplete**: runs finished: plain GAN 4/10" in text
  assert "No difference detected at n = 10/4" in text
  assert "| 7 | 8 | 0.900 | 8 | 0.900 | - | - |" in text


def test_figure_writes_a_png(tmp_path, protocol):
  data = _fake(
    protocol, {a: ([3] * 10, [0.5] * 10) for a in ("reference", "selection", "plain_gan")}
  )
  path = rs.figure(protocol, data, tmp_path / "ring.png")
  assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_issue18_tables_from_the_json():
  table = ring_issue18.issue18_table()
  assert "not pre-registered" in table
  # sample standard deviations (issue 34: "3.0 ± 1.9" was the population std)
  assert "| t2_g40 | 5 | 3.0 ± 2.1 (3 1 4 1 6) |" in table
  # t2_5x5 seed 1: pooled HQ 0.80 (0.72 is the best mixture's)
  assert "| t2_5x5_g40 | 2 | 5.0 ± 2.8 (7 3) | 0.63 ± 0.13 (0.54 0.72) |" in table
  assert "0.65 ± 0.22 (0.49 0.80)" in table
  main = ring_issue18.issue18_main_pairs()
  assert "| mean ± sd | 3.0 ± 2.1 | 0.81 ± 0.17 | 3.0 ± 2.1 | 0.81 ± 0.17 | 3.6 ± 1.3 |" in main


@pytest.mark.parametrize(
  "name",
  ["ring_issue18", "ring_issue18_main", "ring_issue18_nosel_own", "ring_issue18_nosel_own_long"],
)
def test_issue18_readme_blocks_are_current(name):
  readme, _ = _report.BLOCKS[name]
  assert _report.read_block(_report.REPO / readme, name) == _report.make(name)


def test_v2_arm_runs_the_reference_mutation_as_run(protocol):
  """ring.v2 (issue 33): the reference coupling of v1 with ``lr_mutation="reference_as_run"``
  (the reference's p and alpha), beside v1's plain GAN; nothing else differs from v1's arms."""
  v2 = rs.load_protocol(ring_tables.paths(2)["protocol"])
  assert list(v2["arms"]) == ["reference_as_run", "plain_gan"] and v2["seeds"] == list(range(10))
  assert v2["primary"]["comparisons"] == [["reference_as_run", "plain_gan"]]
  new, old = rs.arm_config(v2, "reference_as_run", 3), rs.arm_config(protocol, "reference", 3)
  c = coevolution_config(new)
  assert c.lr_mutation == "reference_as_run" and not c.selection
  assert (c.mutation_probability, c.mutation_scale) == (0.5, 1e-4)
  diff = {k for k in new if new[k] != old[k]}
  assert diff == {"lr_mutation", "mutation_probability", "mutation_scale"}
  plain2, plain1 = rs.arm_config(v2, "plain_gan", 3), rs.arm_config(protocol, "plain_gan", 3)
  assert plain2.to_dict() == plain1.to_dict()
