"""The life of a run from the command line: reruns, Ctrl-C, the compilation cache.

Finished runs are built by hand (a checkpoint folder at the last step, metrics, config), so
reporting them must not compile anything; the command-line tests run the real modules in
subprocesses and stop one with SIGINT while it compiles.
"""

import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import pytest

from minmaxlab import runner
from tests import _procs, _xla

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path, **extra):
  env = {k: v for k, v in os.environ.items() if k != "MINMAXLAB_RERUN"}
  env.update(MINMAXLAB_CACHE_DIR=str(tmp_path / "jax-cache"), **extra)
  env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
  return env


def _fake_finished(workdir: Path, config, total: int) -> None:
  """A workdir as a finished run leaves it (only what the rerun rule reads)."""
  (workdir / "checkpoints" / "step_0").mkdir(parents=True)
  (workdir / "checkpoints" / f"step_{total}").mkdir()
  (workdir / "config.json").write_text(config.to_json(indent=2))
  rows = [{"step": s, "g_loss": 0.5} for s in range(1, total + 1)]
  (workdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  (workdir / "finished.json").write_text(json.dumps({"total": total, "products": []}))


def _snapshot(workdir: Path) -> dict:
  """Every file's digest, except the workdir lock (``runner.lock_workdir``): the one file a
  command that only reports takes, to keep a second process out while it reads; it is
  never removed (an unlinked lock file would let two processes hold two locks)."""
  return {
    str(p.relative_to(workdir)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "")
    for p in sorted(workdir.rglob("*"))
    if p.name != ".lock"
  }


def test_run_status_and_finished_run_read_only(tmp_path):
  assert runner.run_status(None, 10) == "new"
  assert runner.run_status(5, 10) == "unfinished"
  assert runner.run_status(10, 10) == runner.run_status(12, 10) == "finished"
  missing = tmp_path / "nothing"
  assert runner.checkpoint_steps(missing) == [] and runner.finished_run(missing, 3) is None
  assert not missing.exists()  # looking creates nothing
  (tmp_path / "checkpoints" / "step_2").mkdir(parents=True)
  (tmp_path / "checkpoints" / ".tmp-step_3-abc").mkdir()  # a half-written one does not count
  (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2, "x": 1}\n')
  assert runner.checkpoint_steps(tmp_path) == [2]
  assert runner.finished_run(tmp_path, 3) is None
  assert runner.finished_run(tmp_path, 2) is None  # no summary, no finish marker
  (tmp_path / "summary.json").write_text("{}")  # a run written before the marker existed
  assert runner.finished_run(tmp_path, 2) == {"step": 2, "x": 1}


def test_config_changes_and_interrupted_line(tmp_path):
  from experiments.gan.configs import smoke

  config = smoke.get_config()
  assert runner.config_changes(tmp_path, config) == {}  # nothing saved yet
  (tmp_path / "config.json").write_text(config.to_json())
  config.seed, config.num_steps = 3, 80
  assert runner.config_changes(tmp_path, config, may_change=("num_steps",)) == {"seed": (0, 3)}
  config.new_field = 1  # added to the code after the run: not a change of this run
  assert runner.config_changes(tmp_path, config, may_change=("num_steps",)) == {"seed": (0, 3)}
  line = runner.interrupted_line("generation", 7, 40, 5, "python3 dev.py main")
  assert line == (
    "interrupted at generation 7/40 (saved: generation 5); continue with: python3 dev.py main"
  )
  assert "nothing saved yet" in runner.interrupted_line("step", 0, 40, None, "x")


def test_rerun_command(monkeypatch):
  monkeypatch.delenv("MINMAXLAB_RERUN", raising=False)
  cmd = runner.rerun_command("experiments.gan.main", ["main.py", "--workdir", "runs/a b"])
  assert cmd == "python -m experiments.gan.main --workdir 'runs/a b'"
  monkeypatch.setenv("MINMAXLAB_RERUN", "python3 dev.py main")
  assert runner.rerun_command("experiments.gan.main", ["x"]) == "python3 dev.py main"


def test_trainers_report_a_finished_run_without_changing_it(tmp_path):
  from experiments.coevolution import train as coev_train
  from experiments.coevolution.configs import smoke as coev_smoke
  from experiments.gan import train as gan_train
  from experiments.gan.configs import smoke as gan_smoke

  for name, train, config, total in (
    ("gan", gan_train, gan_smoke.get_config(), "num_steps"),
    ("coev", coev_train, coev_smoke.get_config(), "generations"),
  ):
    workdir = tmp_path / name
    _fake_finished(workdir, config, config[total])
    before = _snapshot(workdir)
    row = train.train(config, workdir, resume=True)  # returns at once: nothing compiles
    assert row == {"step": config[total], "g_loss": 0.5}
    assert _snapshot(workdir) == before
  # The coevolution report copes with a summary without timings.
  summary = tmp_path / "summary.json"
  summary.write_text(
    json.dumps(
      {
        "grid": [2, 2],
        "cell_strategy": "map",
        "generations": 4,
        "first_generation_seconds": None,
        "median_generation_seconds": None,
      }
    )
  )
  assert coev_train.report({}, summary) == "grid 2x2 (map), 4 generations"


def test_cli_reports_finished_run_and_refuses_another_config(tmp_path):
  from experiments.gan.configs import smoke

  config = smoke.get_config()
  workdir = tmp_path / "run"
  _fake_finished(workdir, config, config.num_steps)
  before = _snapshot(workdir)
  cmd = [
    sys.executable,
    "-m",
    "experiments.gan.main",
    "--config",
    "experiments/gan/configs/smoke.py",
    "--workdir",
    str(workdir),
  ]
  out = _procs.run(cmd, cwd=ROOT, env=_env(tmp_path), timeout=120)
  assert out.returncode == 0, out.stderr
  assert "finished earlier (step 40/40); nothing changed" in out.stdout
  assert "final: step=40" in out.stdout
  assert _snapshot(workdir) == before
  assert not (tmp_path / "jax-cache").exists()  # a report compiles nothing
  out = _procs.run(
    [*cmd, "--config.seed=5"],
    cwd=ROOT,
    env=_env(tmp_path),
    timeout=120,
  )
  assert out.returncode == 1
  assert out.stderr.strip().splitlines()[-1] == (
    f"ERROR: {workdir} holds a run of another config (seed: 0 -> 5); use a fresh --workdir"
  )
  assert _snapshot(workdir) == before


def test_ctrl_c_while_compiling_ends_at_once_with_one_line(tmp_path):
  workdir = tmp_path / "run"
  cmd = [
    sys.executable,
    "-m",
    "experiments.gan.main",
    "--config",
    "experiments/gan/configs/smoke.py",
    "--workdir",
    str(workdir),
    # The smoke chunk compiles in about 1.0 s, as long as the wait for the "compiling" line:
    # in a CI run the signal came after the compilation. Ten unrolled discriminator steps
    # compile for about 7 s (Zen 5); the test ends after the first second either way.
    "--config.scheme=unrolled",
    "--config.unroll_steps=10",
  ]
  # XLA's default code (tests/_xla.py): a compile that runs well past the 1 s of its message
  env = _xla.default_env(_env(tmp_path, MINMAXLAB_RERUN="python3 dev.py gan-demo"))
  err_path = tmp_path / "stderr.txt"
  with open(err_path, "w") as err:
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
  try:
    deadline = time.monotonic() + 120
    # "compiling jit(...) ..." is printed once a compilation has run for 1 s.
    while "compiling " not in err_path.read_text() and time.monotonic() < deadline:
      assert proc.poll() is None, err_path.read_text()
      time.sleep(0.1)
    assert "compiling " in err_path.read_text()
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    took = time.perf_counter() - t0
  finally:
    proc.kill()
    proc.wait()
  rest = err_path.read_text()
  assert proc.returncode == 130
  assert took < 10  # at once, not after the compilation
  tail = [line for line in rest.splitlines() if line.strip()]
  # Whether the step-0 checkpoint was written before the signal depends on the machine's speed.
  assert re.fullmatch(
    r"interrupted at step 0/40 \((nothing saved yet|saved: step 0)\); "
    r"continue with: python3 dev\.py gan-demo",
    tail[-1],
  ), rest
  assert "Traceback" not in rest


def test_dev_py_passes_ctrl_c_to_the_child_without_a_traceback(tmp_path):
  child = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGINT, lambda *a: (print('child: one line', flush=True),"
    " sys.exit(130)))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
  )
  code = (
    "import sys; sys.path.insert(0, sys.argv[1]); import dev;"
    " sys.exit(dev.run_child([sys.executable, '-c', sys.argv[2]]))"
  )
  proc = subprocess.Popen(
    [sys.executable, "-c", code, str(ROOT), child],
    cwd=tmp_path,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    start_new_session=True,
  )
  try:
    for line in proc.stdout:
      if line.strip() == "ready":
        break
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: the whole process group
    out, err = proc.communicate(timeout=30)
  finally:
    proc.kill()
    proc.wait()
  assert proc.returncode == 130
  assert "child: one line" in out
  assert err == ""


def test_dev_py_keeps_the_childs_status_when_ctrl_c_lands_as_it_exits(tmp_path):
  # The child signals its parent and exits at once, so SIGINT reaches dev.py while it waits
  # for or reaps the child. With a KeyboardInterrupt there, an interrupt landing between
  # waitpid and Popen storing the status lost it (the retried wait found no child: 0).
  child = "import os, signal; os.kill(os.getppid(), signal.SIGINT); os._exit(7)"
  code = (
    "import sys; sys.path.insert(0, sys.argv[1]); import dev;"
    " s = [dev.run_child([sys.executable, '-c', sys.argv[2]]) for _ in range(10)];"
    " sys.exit(0 if s == [7] * 10 else 1)"
  )
  done = _procs.run([sys.executable, "-c", code, str(ROOT), child], cwd=tmp_path, timeout=120)
  assert done.returncode == 0, done.stderr
  assert done.stderr == ""


def test_compilation_cache_and_compile_messages(tmp_path):
  names = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
  )
  saved = {n: getattr(jax.config, n) for n in names}
  try:
    assert runner.enable_compilation_cache(tmp_path / "cache") == tmp_path / "cache"
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "cache")
    assert jax.config.jax_persistent_cache_min_compile_time_secs <= 0.1
  finally:
    for n, v in saved.items():
      jax.config.update(n, v)
  stream = io.StringIO()
  reporter = runner.report_compilation(stream=stream, announce_after=0.0, min_seconds=0.0)
  try:

    def lifecycle_probe(x):
      return jnp.sin(x) * 3.0 + 1.0

    jax.jit(lifecycle_probe)(jnp.ones(7)).block_until_ready()
    time.sleep(0.05)
  finally:
    reporter.enabled = False
  text = stream.getvalue()
  assert "compiled jit(lifecycle_probe) in " in text
  assert any(name == "jit(lifecycle_probe)" for name, _, _ in reporter.log)


def test_the_users_minimum_compile_time_wins_over_the_default(monkeypatch, tmp_path):
  """0.1 s unless JAX's own variable is set (the test session sets 0: every program stored)."""
  names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
  saved = {n: getattr(jax.config, n) for n in names}
  try:
    monkeypatch.delenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", raising=False)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 7.0)
    runner.enable_compilation_cache(tmp_path / "a")
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.1
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # as JAX read it
    runner.enable_compilation_cache(tmp_path / "b")
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
  finally:
    for n, v in saved.items():
      jax.config.update(n, v)


def test_cache_dir_from_environment(monkeypatch, tmp_path):
  monkeypatch.setenv("MINMAXLAB_CACHE_DIR", str(tmp_path / "c"))
  assert runner.compilation_cache_dir() == tmp_path / "c"
  monkeypatch.setenv("MINMAXLAB_CACHE_DIR", "off")
  assert runner.compilation_cache_dir() is None and runner.enable_compilation_cache() is None
  monkeypatch.delenv("MINMAXLAB_CACHE_DIR")
  monkeypatch.setenv("MINMAXLAB_CACHE", str(tmp_path / "root"))
  assert runner.compilation_cache_dir() == tmp_path / "root" / "jax"


def _doc_block(marker: str, doc: str = "docs/coevolution.md") -> str:
  """The one ```python block of ``doc`` holding ``marker`` (the guides moved out of the README
  into docs/, issue 35)."""
  text = (ROOT / doc).read_text()
  blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
  (block,) = [b for b in blocks if marker in b]
  return block


def test_docs_load_run_example_samples_the_best_mixture(tmp_path, monkeypatch):
  """The load_run example of docs/coevolution.md on a smoke run's checkpoint at its last
  generation (the initial grid: restoring and sampling need no training)."""
  import numpy as np

  from experiments.coevolution import train
  from experiments.coevolution.configs import smoke

  config = smoke.get_config()
  config.progress = False
  workdir = tmp_path / "runs" / "coevolution_ring8"
  progs = train.programs(config)
  state = progs.init(train.keys(config)[0])
  run_key = np.asarray(jax.random.key_data(jax.random.key(config.seed)))
  runner.CheckpointManager(workdir / "checkpoints").save(
    config.generations, {"state": jax.device_get(state), "key": run_key}
  )
  runner.write_config(workdir, config, module="experiments.coevolution.train")
  row = {"generation": config.generations, "mixture/modes_covered": 3}
  (workdir / "metrics.jsonl").write_text(json.dumps(row) + "\n")
  monkeypatch.chdir(tmp_path)
  block = _doc_block("runner.load_run(")
  exec(compile(block, "docs/coevolution.md", "exec"), {})
  png = workdir / "best_mixture.png"  # into the run's folder, not the working directory
  assert png.stat().st_size > 1000 and not (tmp_path / "best_mixture.png").exists()
  # The same block in a fresh process outside the repository, where `experiments` is not
  # importable: load_run imports the trainer from the folder config.json recorded (issue 35).
  png.unlink()
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["JAX_PLATFORMS"] = "cpu"
  result = _procs.run([sys.executable, "-c", block], timeout=180, cwd=tmp_path, env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split()[:3] == ["2", "2", "3"] and png.stat().st_size > 1000
  assert json.loads((workdir / "config.json").read_text())["run"]["module_root"] == str(ROOT)
  run = runner.load_run(workdir)
  assert run.step == config.generations and run.module is train
  assert run.config.rows == 2 and "run" not in run.config
  chex.assert_trees_all_equal(run.state["state"], jax.device_get(state))
  x = train.sample_best_mixture(run, 300, seed=1)
  assert x.shape == (300, 2) and np.all(np.isfinite(x))
  np.testing.assert_array_equal(x, train.sample_best_mixture(run, 300, seed=1))


def test_load_run_names_a_trainer_it_cannot_import_in_one_line(tmp_path):
  (tmp_path / "config.json").write_text(json.dumps({"run": {"module": "no_such_pkg_35.train"}}))
  with pytest.raises(ModuleNotFoundError, match=r"no_such_pkg_35\.train cannot be imported"):
    runner.load_run(tmp_path)


def test_load_run_finds_the_trainer_package_above_the_workdir(tmp_path, monkeypatch):
  """A run of an earlier version (no module_root recorded) inside the project's folder: the
  nearest folder above the workdir holding the trainer's package is used."""
  import numpy as np

  pkg = tmp_path / "proj" / "mytrainer_35"
  pkg.mkdir(parents=True)
  (pkg / "__init__.py").write_text("")
  (pkg / "train.py").write_text(
    "import numpy as np\ndef checkpoint_target(config):\n  return {'w': np.zeros(2, np.float32)}\n"
  )
  workdir = tmp_path / "proj" / "runs" / "r"
  runner.CheckpointManager(workdir / "checkpoints").save(3, {"w": np.ones(2, np.float32)})
  (workdir / "config.json").write_text(json.dumps({"run": {"module": "mytrainer_35.train"}}))
  monkeypatch.setattr(sys, "path", list(sys.path))  # the appended folder goes with the test
  run = runner.load_run(workdir)
  assert run.step == 3 and run.module.__name__ == "mytrainer_35.train"
  np.testing.assert_array_equal(run.state["w"], np.ones(2, np.float32))
  sys.modules.pop("mytrainer_35.train", None)
  sys.modules.pop("mytrainer_35", None)


def test_tfds_offline_fails_fast_with_one_line_and_creates_nothing(tmp_path):
  pytest.importorskip("tensorflow_datasets")
  home, data_dir = tmp_path / "home", tmp_path / "data"
  home.mkdir()
  code = "import sys; from minmaxlab.gan import data; data.load('tfds:mnist', data_dir=sys.argv[1])"
  env = _env(tmp_path, HOME=str(home), MINMAXLAB_OFFLINE="1")
  t0 = time.perf_counter()
  out = _procs.run(
    [sys.executable, "-c", code, str(data_dir)],
    cwd=tmp_path,
    env=env,
    timeout=300,
  )
  took = time.perf_counter() - t0
  assert out.returncode == 1
  last = out.stderr.strip().splitlines()[-1]
  assert last.startswith(f"RuntimeError: tfds data set 'mnist' is not prepared in {data_dir}")
  assert "tfds.builder('mnist', data_dir=" in last and ".download_and_prepare()" in last
  assert took < 120  # imports only: no download retries
  assert list(home.iterdir()) == []  # no ~/tensorflow_datasets
  assert sorted(p.name for p in tmp_path.iterdir() if p.name != "data") == ["home"]


def test_dev_py_main_installs_base_only_and_test_upgrades(tmp_path, monkeypatch):
  sys.path.insert(0, str(ROOT))
  try:
    import dev
  finally:
    sys.path.remove(str(ROOT))
  venv = tmp_path / ".venv"
  monkeypatch.setattr(dev, "VENV", venv)
  monkeypatch.setattr(dev, "PY", venv / "bin" / "python")
  monkeypatch.setattr(dev, "STAMP", venv / ".minmaxlab-installed")
  monkeypatch.setattr(dev, "MAIN_STAMP", venv / ".minmaxlab-main")
  calls = []

  def fake_run(cmd, **kw):
    calls.append(" ".join(map(str, cmd)))
    if cmd[1:3] == ["-m", "venv"]:
      (venv / "bin").mkdir(parents=True)
      (venv / "bin" / "python").touch()
    return subprocess.CompletedProcess(cmd, 0)

  monkeypatch.setattr(dev, "run", fake_run)
  dev.ensure_venv(full=False)  # main: the project alone
  assert any(c.endswith("pip install -q -e .") for c in calls)
  assert not any("mpi" in c or "[dev" in c for c in calls)
  calls.clear()
  dev.ensure_venv(full=False)  # again: nothing to do
  assert calls == []
  dev.ensure_venv(full=True)  # test: extras and MPI added to the same venv
  assert dev.EXTRAS == "dev,tfds,docs"  # the docs extra: tests/test_docs.py builds the site
  assert any("-e .[dev,tfds,docs]" in c for c in calls)
  # then the documented MPI route: the MPICH wheel first, then the mpi extra (mpi4jax)
  (mpich,) = [i for i, c in enumerate(calls) if c.endswith("pip install -q mpich")]
  (extra,) = [
    i for i, c in enumerate(calls) if c.endswith("pip install -q --no-cache-dir -e .[mpi]")
  ]
  assert mpich < extra
  calls.clear()
  dev.ensure_venv(full=False)  # a full environment serves main too
  dev.ensure_venv(full=True)
  assert calls == []


def test_ctrl_c_during_the_baseline_names_the_baseline_and_its_generation(tmp_path):
  """Issue 47: Ctrl-C while the main job's baseline trained (at 3/12) printed
  ``interrupted at generation 12/12``, the grid's last generation."""
  import ml_collections

  from minmaxlab.runner._lifecycle import Rerun

  config = ml_collections.ConfigDict({"seed": 0})
  main = Rerun("new", None)
  main.on_log(12)  # the grid has trained all its generations
  line = main.describe(tmp_path, "generation", 12, "python3 dev.py main")
  assert line.startswith("interrupted at generation 12/12 (nothing saved yet)")
  base = runner.TrainingRun(tmp_path / "baseline_1x1", config, 12)
  base.open_writers(resume=False, tensorboard=False, step_key="generation")
  try:
    for g in (1, 2, 3):
      base.writer.write(g, {"x": 1.0})
    base.checkpoint(2, {"w": jnp.zeros(2)})
    line = main.describe(tmp_path, "generation", 12, "python3 dev.py main")
    assert line == (
      f"interrupted at generation 3/12 of the run in {tmp_path / 'baseline_1x1'} (saved:"
      " generation 2); continue with: python3 dev.py main"
    )
  finally:
    base.close([])
  assert main.describe(tmp_path, "generation", 12, "c").startswith(
    "interrupted at generation 12/12"
  )


def test_load_run_of_a_missing_or_unloadable_workdir_is_one_line(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  with pytest.raises(FileNotFoundError) as e:
    runner.load_run("runs/nope")
  assert str(e.value) == f"runs/nope ({tmp_path / 'runs' / 'nope'}) holds no run (no config.json)"
  (tmp_path / "g").mkdir()
  runner.write_config(tmp_path / "g", {"seed": 0}, module="json")  # a module without the hook
  with pytest.raises(ValueError) as e:
    runner.load_run("g")
  assert "\n" not in str(e.value) and "defines no checkpoint_target(config)" in str(e.value)
