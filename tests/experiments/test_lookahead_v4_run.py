"""Lookahead v4's run command (``experiments.gan.results run --protocol
protocols/lookahead.v4.json``): the protocol's configuration reaches the study (the notebook's
networks, optimizer and per-player latent draws), and a run stopped after its first
evaluation and started again ends with the numbers of an uninterrupted run.

The stop-and-resume run keeps every v4 operator but the network: the notebook's optimizer
composition (ExtraGrad with LA and the slow-weight EMA: the largest optimizer state, with
the lazily set slow weights) and ``latent_draws="per_player"``, two seeds vmapped, on a tiny
MLP and the 8x8 digits so it compiles in seconds (the DCGAN of the notebook is what
``tests/parity/test_lagan_dcgan.py`` checks; the resume goes through the same checkpoint of
the whole training state whatever the network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import _report, study
from experiments.gan import lookahead_study, lookahead_v3, results

# the programs run long (a study's training runs):
# compiled at -O1, not the session's -O0 (tests/_xla.py)
pytestmark = pytest.mark.optimized_code

V4 = lookahead_v3.VERSIONS[4][0]


class _Stop(Exception):
  pass


def test_the_v4_protocol_configures_the_notebooks_networks_and_draws(tmp_path):
  argv = ["run", "--protocol", str(_report.REPO / V4), "--trial", f"--runs={tmp_path}"]
  ctx, arms, seeds = study.context(results.STUDY, study.parse(results.STUDY, argv))
  args = results.settings(ctx)
  assert list(ctx.protocol["arms"]) == ["alt", "la_alt_k1000", "eg", "la_eg_k1000"]
  assert args.overrides == [] and arms is None and seeds is None and ctx.runs == tmp_path
  spec = results.arm_spec(ctx.protocol, "la_eg_k1000")
  config = lookahead_study.study_config("la_eg_k1000", 0, args, spec)
  assert (config.architecture, config.optimizer) == ("dcgan_notebook", "notebook")
  assert config.latent_draws == "per_player" and config.num_steps == 100_000
  assert (config.scheme, config.sync_period, config.slow_step_size) == ("extragradient", 1000, 0.5)
  assert (config.batch_size, config.lr_min, config.lr_max, config.b1) == (50, 1e-3, 1e-3, 0.05)


def _argv(tmp_path, name: str) -> list[str]:
  return [
    "run",
    "--protocol",
    str(_report.REPO / V4),
    "--trial",
    "--seeds=0,1",
    "--arms=la_eg_k1000",
    "--steps=4",
    "--eval-every=2",
    "--eval-samples=40",
    "--batch-size=8",
    "--set=sync_period=2",
    "--set=dataset=digits8",
    "--set=architecture=mlp",
    "--set=hidden=[8,8]",
    "--set=latent_dim=4",
    "--set=classifier.steps=20",
    f"--set=classifier.cache_dir={tmp_path / 'cache'}",
    f"--runs={tmp_path / name / 'runs'}",
    f"--out={tmp_path / name / 'out' / 'lookahead.json'}",
  ]


def _run(argv, log) -> dict:
  study.run(results.STUDY, study.parse(results.STUDY, argv), log)
  return json.loads(Path(argv[-1].split("=", 1)[1]).read_text())


def _without_cpu(data: dict) -> list[dict]:
  """The runs with the CPU seconds (which differ between processes) taken out."""
  runs = []
  for r in data["runs"]:
    curves = [{k: v for k, v in row.items() if k != "cpu_s"} for row in r["curves"]]
    runs.append({**{k: v for k, v in r.items() if k != "cpu_s_all_seeds"}, "curves": curves})
  return runs


@pytest.mark.slow  # a run, a stopped run and its resume
def test_a_stopped_v4_run_resumes_to_the_uninterrupted_result(tmp_path):
  whole = _run(_argv(tmp_path, "whole"), log=lambda s: None)
  assert [[row["step"] for row in r["curves"]] for r in whole["runs"]] == [[2, 4], [2, 4]]
  assert whole["protocol"]["latent_draws"] == "per_player"
  assert whole["protocol"]["optimizer"] == "notebook"

  def stop(line):  # the process dies after the first evaluation's checkpoint
    if " step 2:" in line:
      raise _Stop(line)

  argv = _argv(tmp_path, "stopped")
  with pytest.raises(_Stop, match="step 2"):
    _run(argv, log=stop)
  out = tmp_path / "stopped" / "out" / "lookahead.json"
  partial = json.loads(out.read_text())  # the progress written at the evaluation
  assert {r["steps"] for r in partial["runs"]} == {2}
  logs = []
  resumed = _run(argv, log=logs.append)
  steps = [line for line in logs if " step " in line]
  assert len(steps) == 1 and "step 4" in steps[0]  # only the steps after the checkpoint ran
  assert _without_cpu(resumed) == _without_cpu(whole)
  assert resumed["registration"]["trial"] is True
