"""The join between the two sides of the ring outcome study (issue 45 item 2): the YAML file
the reference's clients run (``experiments/parity/lipizzaner_ring_run.write_config``, from the
reference's neurips2018 3x3 files) read by the library (``lipizzaner_config.read`` with the
reference's coupling) gives the configuration the study's library arms run
(``ring_study.arm_config`` of the registered protocol), field for field, except the named
departures below, each checked to be what the protocol says it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.coevolution import lipizzaner_config as lip
from experiments.coevolution import ring_study
from experiments.parity import lipizzaner_ring_run as ring_run
from tests._lipizzaner_yaml import GENERAL, MNIST

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "experiments/parity/protocols/lipizzaner_ring_outcome.v4.json"
ARMS = {"library_selection": True, "library_whole": False}  # arm -> the reference's selection


def _reference_yaml(tmp_path: Path, selection: bool, seed: int) -> Path:
  """The file a reference run of the study writes, from the neurips2018 3x3 files."""
  src = tmp_path / "src"
  conf = src / "configuration" / "neurips2018"
  (conf / "mnist").mkdir(parents=True, exist_ok=True)
  nodes = "    - address: 10.0.0.1\n      port: 5000-5008"
  (conf / "general-3x3.yml").write_text(GENERAL.format(nodes=nodes))
  (conf / "mnist" / "mnist-3x3.yml").write_text(MNIST.format(n=3))
  return ring_run.write_config(
    src, tmp_path / "out", selection=selection, seed=seed, iterations=40, eval_samples=2500
  )


def _arm(protocol: dict, arm: str, seed: int):
  sub = {"common": protocol["library"]["common"], "arms": {arm: protocol["arms"][arm]}}
  return ring_study.arm_config(sub, arm, seed)


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_the_reference_runs_yaml_read_by_the_library_is_the_library_arms_config(tmp_path, arm):
  protocol = json.loads(PROTOCOL.read_text())
  selection = ARMS[arm]
  read = lip.read(_reference_yaml(tmp_path, selection, seed=3), coupling="reference")
  config = _arm(protocol, arm, seed=3)
  differ = {}
  for field, value in read.items():
    ours = config[field]
    ours = tuple(ours) if isinstance(ours, list | tuple) else ours
    if ours != value:
      differ[field] = (value, ours)
  # the departures, each as the protocol names it
  departures = " ".join(protocol["departures"])
  expected = {"dataset_size", "mixture_samples"} | ({"n_replacements"} if not selection else set())
  assert set(differ) == expected, differ
  # the reference draws batch_size * n_batches records once; the library draws fresh samples
  # every batch (a finite set of dataset_size points is used only with a data diet)
  assert differ["dataset_size"][0] == 128 * 250 and config.sampling_ratio == 1.0
  assert "32000 records" in departures and "the library samples each batch" in departures
  # the clients' mixture ES: the reference's trainer scores score.sample_size (unset: 10000)
  # samples; the file's score_sample_size, read as the library reads it, would give 200 per
  # generator; the ring's 500 is the library arm's
  assert differ["mixture_samples"] == (200, 500) and "10,000 samples" in departures
  if not selection:  # replacement happens only with selection: n_replacements is unused
    assert config.selection is False and differ["n_replacements"] == (1, 0)
  # the reference's coupling and its named behaviours are every arm's
  for field, value in lip.REFERENCE_COUPLING.items():
    assert config[field] == value, field
  assert config.opponents == ("selected" if selection else "neighbourhood")


def test_the_coupling_is_checked_and_the_librarys_own_leaves_the_schedule(tmp_path):
  path = _reference_yaml(tmp_path, selection=True, seed=0)
  own = lip.read(path)
  assert own["schedule"] == "lipizzaner" and "neighbourhood_layout" not in own
  assert own["architecture"] == "mlp" and own["hidden"] == (64, 64) and own["latent_dim"] == 16
  assert own["dataset"] == "ring8" and own["rows"] == own["cols"] == 3 and own["seed"] == 0
  with pytest.raises(lip.UnsupportedField, match="coupling: 'exact'"):
    lip.read(path, coupling="exact")


def test_the_config_file_takes_the_coupling(tmp_path):
  from experiments.coevolution.configs import lipizzaner

  path = _reference_yaml(tmp_path, selection=False, seed=1)
  assert lipizzaner.get_config(str(path)).schedule == "lipizzaner"
  c = lipizzaner.get_config(f"{path},reference")
  assert c.schedule == "reference" and c.neighbourhood_layout == "transposed"
  assert c.opponents == "neighbourhood" and c.lipizzaner_yaml == str(path)
