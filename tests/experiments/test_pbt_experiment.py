"""experiments/pbt end to end: ``smoke`` inline and under ``mpirun -n 3``, and a
shrunk ``fashion_mnist_lagan`` (real Fashion-MNIST, classifier-FID fitness)."""

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

from experiments.pbt import train
from experiments.pbt.configs import fashion_mnist_lagan, smoke
from minmaxlab import pbt
from minmaxlab.gan import data
from tests import _procs

# the programs run long (PBT trials' training and FID):
# compiled at -O1, not the session's -O0 (tests/_xla.py)
pytestmark = pytest.mark.optimized_code

ROOT = Path(__file__).resolve().parents[2]
MPIRUN = Path(sys.executable).parent / "mpirun"
HAVE_MPI = importlib.util.find_spec("mpi4py") is not None and MPIRUN.exists()
HAVE_FASHION = (data.FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").exists() or (
  data.FASHION_MNIST_DIR / "train-images-idx3-ubyte"
).exists()


def _check_lineage(rows, config):
  """Ids 1..num_trials once each; children start where their parent stopped."""
  assert [r["trial"] for r in rows] == list(range(1, config.num_trials + 1))
  by_id = {r["trial"]: r for r in rows}
  for r in rows:
    if r["parent"] is None:
      assert r["start_step"] == 0
    else:
      p = by_id[r["parent"]]
      assert p["trial"] < r["trial"] and r["start_step"] == p["start_step"] + p["steps"]


def test_smoke_with_two_worker_processes_and_resume_of_a_finished_run(tmp_path):
  config = smoke.get_config()
  logs = []
  s = train.train(config, tmp_path, workers=2, timeout=_procs.scaled(600), log=logs.append)
  assert s["done"] == config.num_trials and s["pending"] == s["running"] == 0
  # the live output: a status line, then the population table (one row per member)
  final = f"trials done {config.num_trials}/{config.num_trials}, running 0, pending 0"
  assert [x for x in logs if x.startswith("trials done")][-1].startswith(final)
  table = [x for x in logs if x.startswith("  member")][-1].splitlines()
  assert table[0].split() == [
    "member",
    "trial",
    "parent",
    "status",
    "fitness",
    *train.search_space(config),
  ]
  assert [int(x.split()[0]) for x in table[1:]] == list(range(config.population_size))
  assert all(x.split()[3] == "done" for x in table[1:])
  # The table is refreshed whenever the number of finished trials changes (two workers may
  # finish within one poll, so that is not always once per trial).
  done_counts = {x.split()[2] for x in logs if x.startswith("trials done")}
  assert sum(x.startswith("  member") for x in logs) >= len(done_counts) >= 2
  rows = [json.loads(x) for x in (tmp_path / "lineage.jsonl").read_text().splitlines()]
  assert [r["trial"] for r in rows] == list(range(1, config.num_trials + 1))
  space = train.search_space(config)
  for r in rows:
    for name, dim in space.items():
      assert dim.low <= r[name] <= dim.high
  chain = s["best_lineage"]
  assert chain[0]["start_step"] == 0 and chain[-1]["trial"] == s["best_trial"]
  assert [c["start_step"] for c in chain] == [i * config.steps_per_trial for i in range(len(chain))]
  assert chain[-1]["fitness"] == s["best_fitness"] == max(r["fitness"] for r in rows)
  assert s["checkpoints"] <= config.population_size + config.top_k
  assert {r["worker"].split("-")[0] for r in rows} <= {"w0", "w1"}  # the 2 worker processes
  assert (tmp_path / "lineages.png").stat().st_size > 0
  # the store is the state: running again resumes a finished run and changes nothing
  again = train.train(config, tmp_path, workers=0, timeout=_procs.scaled(120), log=logs.append)
  assert again["best_lineage"] == s["best_lineage"] and again["done"] == config.num_trials


@pytest.mark.skipif(not HAVE_MPI, reason=f"needs mpi4py and {MPIRUN} (python3 dev.py mpi)")
def test_smoke_with_mpirun_3(tmp_path):
  """``mpirun -n 3 python -m experiments.pbt.main ... --workers mpi``: rank 0 the
  controller, ranks 1-2 the workers; every trial done once, consistent lineage."""
  config = smoke.get_config()
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg"}
  env.pop("JAX_NUM_CPU_DEVICES", None)
  cmd = [str(MPIRUN), "-n", "3", sys.executable, "-m", "experiments.pbt.main"]
  cmd += ["--config", str(ROOT / "experiments/pbt/configs/smoke.py"), "--workdir", str(tmp_path)]
  cmd += ["--workers", "mpi", "--timeout", str(_procs.scaled(600))]
  proc = _procs.run(cmd, timeout=900, cwd=ROOT, env=env)  # the job's group dies with it
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  assert f"{config.num_trials} trials in" in proc.stdout
  assert "  member  trial  parent" in proc.stdout
  heads = [x for x in proc.stdout.splitlines() if x.startswith("pbt: ")]
  assert heads == [
    f"pbt: {config.num_trials} trials of {config.steps_per_trial} steps, task"
    f" ring8, a population of {config.population_size} (tournament exploit),"
    f" workers on the MPI ranks 1..P-1 [backend mpi: 1 cpu device, 3 ranks] -> {tmp_path}"
  ], proc.stdout[:2000]
  s = json.loads((tmp_path / "summary.json").read_text())
  assert s["done"] == config.num_trials and s["worker_ranks"] == 2 and s["lost_ranks"] == []
  rows = [json.loads(x) for x in (tmp_path / "lineage.jsonl").read_text().splitlines()]
  _check_lineage(rows, config)
  assert {r["worker"] for r in rows} <= {"rank1", "rank2"}  # rank 0 only selects
  assert all(r["attempt"] == 1 for r in rows)
  chain = s["best_lineage"]
  assert chain[-1]["trial"] == s["best_trial"] and chain[0]["start_step"] == 0


def test_mpi_needs_two_ranks_before_any_work():
  """The rank-count check itself (the mpirun -n 1 CLI case is in test_pbt_mpi.py;
  this process must not initialise MPI, so a stand-in communicator is used)."""

  class OneRank:
    def Get_size(self):
      return 1

  with pytest.raises(ValueError, match="at least 2 ranks"):
    pbt.mpi_world(OneRank())
  with pytest.raises(ValueError, match="workers must be an integer >= 0 or 'mpi'"):
    train.train(smoke.get_config(), "unused", workers=-1)


@pytest.mark.skipif(not HAVE_FASHION, reason="Debian package dataset-fashion-mnist not installed")
def test_fashion_mnist_lagan_shrunk_end_to_end(tmp_path):
  """The real config, shrunk: real Fashion-MNIST images, LA-AltGAN trials with
  explored lr_G, lr_D, slow_step_size and sync_period, classifier-FID fitness."""
  config = fashion_mnist_lagan.get_config()
  config.train_examples, config.hidden, config.latent_dim, config.batch_size = 2000, (32, 32), 8, 32
  config.population_size, config.num_trials, config.steps_per_trial = 2, 4, 10
  config.eval_samples, config.top_k = 200, 1
  # The fitness is the FID in the features of the cached classifier, whatever its accuracy:
  # 2 steps train it (no check here reads how well it classifies).
  config.classifier.steps, config.classifier.cache_dir = 2, str(tmp_path / "cache")
  logs = []
  s = train.train(config, tmp_path / "run", workers=0, timeout=_procs.scaled(600), log=logs.append)
  assert s["done"] == config.num_trials
  rows = [json.loads(x) for x in (tmp_path / "run" / "lineage.jsonl").read_text().splitlines()]
  _check_lineage(rows, config)
  space = train.search_space(config)
  assert set(space) == {"lr_G", "lr_D", "slow_step_size", "sync_period_index"}
  for r in rows:
    assert r["fitness"] < 0  # -FID: a finite, positive Frechet distance
    assert r["sync_period"] == config.sync_period_choices[r["sync_period_index"]]
    for name in ("lr_G", "lr_D", "slow_step_size"):
      assert space[name].low <= r[name] <= space[name].high
  assert s["best_fitness"] == max(r["fitness"] for r in rows)
  header = [x for x in logs if x.startswith("  member")][-1].splitlines()[0].split()
  assert header[-4:] == ["lr_G", "lr_D", "slow_step_size", "sync_period"]
  assert (tmp_path / "cache" / "fashion_mnist_first2000").is_dir()  # the classifier was cached


@pytest.mark.slow
def test_cli_budget_ends_the_campaign_with_exit_0(tmp_path):
  """``--budget_s``: the trial running when the budget is spent finishes, the summary is
  written, one line says the budget ended it, exit status 0. How many trials fit in 2 s
  depends on the host and on the compilation cache (1 cold, 5 warm on CI), so the campaign
  is made long (200 trials) and the test reads the count from the line."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg"}
  cmd = [sys.executable, "-m", "experiments.pbt.main", "--workers", "0", "--budget_s", "2"]
  cmd += ["--config", str(ROOT / "experiments/pbt/configs/smoke.py"), "--workdir", str(tmp_path)]
  cmd += ["--config.num_trials=200"]
  proc = _procs.run(cmd, timeout=600, cwd=ROOT, env=env)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  lines = [x for x in proc.stdout.splitlines() if x.startswith("the budget of")]
  assert len(lines) == 1, proc.stdout[-2000:]
  assert proc.stdout.startswith("pbt: 200 trials of 20 steps, task ring8,"), proc.stdout[:500]
  head = proc.stdout.splitlines()[0]  # where it runs (issue 49)
  assert head.endswith(f"trials inline [backend inline: 1 cpu device, 1 process] -> {tmp_path}")
  m = re.search(r"ended the campaign after (\d+)/200 trials; continue with: ", lines[0])
  assert m and 1 <= int(m.group(1)) < 200, lines[0]
  s = json.loads((tmp_path / "summary.json").read_text())
  assert s["done"] == int(m.group(1))
  assert s["budget_ended"] and s["running"] == 0 and s["pending"] >= 1


def test_early_stop_config():
  config = smoke.get_config()
  assert train.early_stop(config) is None  # quantile 0: off
  config.early_stop_quantile, config.early_stop_min_steps = 0.5, 40
  assert train.early_stop(config) == pbt.EarlyStop(40, 0.5)
  config.early_stop_quantile = 1.5
  with pytest.raises(ValueError, match="config.early_stop_quantile must be in"):
    train.check_config(config)
