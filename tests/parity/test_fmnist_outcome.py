"""The Fashion-MNIST outcome study's pieces (issue 45 item 2, ``experiments/parity/
lipizzaner_fmnist_*.py``), without torch: the reference's config as the study writes it,
the join with the library's config, reading the master's mixtures, the pick rule, and the
``docs/parity.md`` block regenerated from the committed JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from experiments import _report
from experiments.benchmarks.lipizzaner_side_by_side import InputError
from experiments.coevolution import lipizzaner_config as lip
from experiments.parity import lipizzaner_fmnist_outcome as out
from experiments.parity import lipizzaner_fmnist_run as run
from experiments.parity import lipizzaner_fmnist_tables as tables
from tests._lipizzaner_yaml import GENERAL, MNIST

ROOT = Path(__file__).resolve().parents[2]
NODES = "    - address:\n      port: 5000-5003"


def _checkout(tmp_path: Path) -> Path:
  """A folder shaped as the reference's checkout, with its neurips2018 2x2 files."""
  conf = tmp_path / "lip" / "src" / "configuration"
  (conf / "neurips2018" / "mnist").mkdir(parents=True)
  (conf / "lipizzaner-gan").mkdir()
  (conf / "lipizzaner-gan" / "mnist.yml").write_text(MNIST.format(n=2))
  (conf.parent / "main.py").write_text("")
  (conf / "neurips2018" / "general-2x2.yml").write_text(GENERAL.format(nodes=NODES))
  (conf / "neurips2018" / "mnist" / "mnist-2x2.yml").write_text(MNIST.format(n=2))
  return tmp_path / "lip"


def test_config_changes_only_the_studys_fields(tmp_path):
  text = run.config_text(MNIST.format(n=2), iterations=5, batches=100, eval_samples=10000)
  before, after = MNIST.format(n=2).splitlines(), text.splitlines()
  changed = {a.strip() for b, a in zip(before, after, strict=True) if a != b}
  assert changed == {
    "n_iterations: 5",
    "n_batches: 100",
    "cuda: False",
    "score_sample_size: 10000",
    "general: !include general-fmnist-2x2.yml",
  }
  assert "score_sample_size: 1000" in text  # the clients' score keeps its own size
  general = run.general_text(GENERAL.format(nodes=NODES), output_dir=tmp_path, seed=7)
  assert "seed: 7" in general and "- address: 127.0.0.1" in general
  with pytest.raises(InputError, match="n_batches"):
    run.config_text(MNIST.replace("n_batches", "batches"), iterations=5, batches=1, eval_samples=1)


def test_the_library_reads_the_reference_runs_yaml_as_the_protocol_says(tmp_path):
  protocol = json.loads(out.PROTOCOL.read_text())
  path = out.write_yaml(_checkout(tmp_path), tmp_path / "yaml", 3, protocol["config"])
  read = lip.read(path, coupling="reference")
  config = out.library_config(protocol, 3, path)
  cfg = protocol["config"]
  assert (read["rows"], read["generations"]) == (2, cfg["iterations"])
  assert read["steps_per_generation"] == cfg["batches"]
  assert read["num_eval_samples"] == cfg["eval_samples"] == config.num_eval_samples
  assert (read["d_every"], read["selection"], read["learning_rate"]) == (2, False, 2e-4)
  differ = {k for k, v in read.items() if config[k] != (tuple(v) if isinstance(v, list) else v)}
  assert differ == {"dataset"}  # the reference's "mnist" loader reads the Fashion-MNIST files
  assert config.dataset == "fashion_mnist" and config.seed == 3


def test_node_mixtures_and_the_pick(tmp_path):
  (tmp_path / "eval").mkdir()
  for cell, fid in enumerate([5.0, 2.0, 9.0, 2.0]):
    np.savez(
      tmp_path / "eval" / f"127.0.0.1-{5000 + cell}.npz",
      samples=np.zeros((3, 784), np.float32),
      fid=fid,
      tvd=0.1,
      sources=np.array(["a", "b"]),
      weights=np.array([0.5, 0.5]),
    )
  (tmp_path / "master.log").write_text("x - Best result: 127.0.0.1:5003 = (np.float64(2.0), 0.1)\n")
  got = run.node_mixtures(tmp_path)
  assert sorted(got["nodes"]) == [0, 1, 2, 3] and got["reference_pick"] == 3
  cells = {
    c: {"fid": float(n["fid"]), "class_tvd": 0.0, "inception_score": 1.0}
    for c, n in got["nodes"].items()
  }
  assert out.pick(cells) == 1  # the lowest FID, the lowest cell on a tie
  rec = out.final_mixture(cells)
  assert (
    rec["picked_cell"] == 1
    and rec["mixture/fid"] == 2.0
    and set(rec["cells"]) == {"0", "1", "2", "3"}
  )
  (tmp_path / "eval" / "127.0.0.1-5002.npz").unlink()
  with pytest.raises(RuntimeError, match="3 of 4"):
    run.node_mixtures(tmp_path)


def test_sample_conversions():
  x = np.array([[-1.0, 0.0, 1.0, 2.0]], np.float32)
  assert out.to_uint8(x).tolist() == [[0, 128, 255, 255]]
  assert out.as_images(np.zeros((2, 784))).shape == (2, 28, 28, 1)


def _record(arm, seed, tvd, fid):
  return {
    "arm": arm,
    "seed": seed,
    "mixture/class_tvd": tvd,
    "mixture/fid": fid,
    "mixture/log_fid": math.log(fid),
    "picked_cell": 0,
    "own_pick": 1,
    "cpu_seconds": 10.0,
  }


def test_block_verdicts_from_results(tmp_path):
  protocol = json.loads(out.PROTOCOL.read_text())
  n = len(protocol["seeds"])
  for s in protocol["seeds"]:
    for arm, shift in (("reference", 0.0), ("library", 0.001)):
      rec = _record(arm, s, 0.2 + 0.001 * s + shift, 30.0 + 0.1 * s + shift)
      (tmp_path / f"{arm}_s{s}.json").write_text(json.dumps(rec))
  text = tables.block(out.PROTOCOL, tmp_path)
  for m in protocol["primary"]["margins"].values():  # in the table and in the verdict line
    assert text.count(f"equivalent at margin {m:g}") == 2
  assert "Runs left" not in text
  (tmp_path / f"library_s{protocol['seeds'][-1]}.json").unlink()
  text = tables.block(out.PROTOCOL, tmp_path)
  assert f"library, reference coupling ({n - 1} of {n})" in text and "none yet" in text
  assert "Runs left: library, reference coupling 1;" in text


def test_the_docs_block_is_generated_from_the_committed_json():
  assert tables.BLOCK in _report.BLOCKS
  doc = (ROOT / tables.DOC).read_text()
  begin, end = f"<!-- results:{tables.BLOCK} -->\n", f"\n<!-- /results:{tables.BLOCK} -->"
  assert begin in doc and end in doc
  assert doc.split(begin)[1].split(end)[0].rstrip() == tables.block().rstrip()


def test_the_command_line_names_a_bad_option_in_one_line(tmp_path):
  """The study runs on ``experiments.study``: its own options are checked before anything runs."""
  missing = str(tmp_path / "nope")
  with pytest.raises(SystemExit) as e:
    out.main(["run", "--lipizzaner", missing])
  assert str(e.value.code) == f"lipizzaner_fmnist_outcome: --lipizzaner {missing}: not a checkout"
  with pytest.raises(SystemExit, match="--iterations 2: measure only"):
    out.main(["run", "--lipizzaner", str(tmp_path), "--iterations", "2"])
  with pytest.raises(SystemExit, match="--seeds 11: not a seed of"):
    out.main(["run", "--lipizzaner", str(tmp_path), "--seeds", "11", "--runs", missing])
  assert not Path(missing).exists() and out.STUDY.blocks == (tables.BLOCK,)
