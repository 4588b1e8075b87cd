"""experiments/coevolution end to end on the ``smoke`` config (one compiled generation step).

Every test here reuses the smoke config's programs (``train.programs`` caches them per
config in the process), so the XLA compile of the generation step happens once.
"""

import contextlib
import json
import os
import sys
from pathlib import Path

import chex
import jax
import numpy as np
import pytest
from jax.experimental.compilation_cache import compilation_cache

from experiments.coevolution import train
from experiments.coevolution.configs import smoke
from experiments.coevolution.experiment import coevolution_config
from minmaxlab import runner
from minmaxlab.runner import _stored_programs
from tests import _procs

ROOT = Path(__file__).resolve().parents[2]


class Interrupt(Exception):
  pass


def _config(**overrides):
  c = smoke.get_config()
  c.progress = False
  for k, v in overrides.items():
    c[k] = v
  return c


def _restore(workdir, step=None):
  ck = runner.CheckpointManager(Path(workdir) / "checkpoints")
  progs = train.programs(_config())
  state = progs.init(jax.random.key(0))
  target = {"state": state, "key": np.zeros(2, np.uint32)}
  tree, meta = ck.restore(jax.eval_shape(lambda: target), step)
  return tree, meta


def _scalars(logdir):
  """``{tag: [(step, value), ...]}`` of the event files directly in ``logdir``."""
  out = {}
  for f in sorted(Path(logdir).glob("events.out.tfevents.*")):
    for step, tag, value in runner.read_scalars(f):
      out.setdefault(tag, []).append((step, value))
  return out


def _strip(rows):
  return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@contextlib.contextmanager
def _compilation_cache(folder):
  """A fresh JAX persistent cache in ``folder`` for a block (the stored programs go next to
  it), as a new user's first run has: ``runner.stored_program`` stores only what its process
  compiled, and the session's cache may already hold one of the smoke config's programs
  (every program is cached there, tests/conftest.py, and other files run the smoke config)."""
  saved = jax.config.jax_compilation_cache_dir
  compilation_cache.reset_cache()  # JAX opens the folder at its next compile
  jax.config.update("jax_compilation_cache_dir", str(folder))
  try:
    yield folder
  finally:
    # The programs stay cached for the tests below (already compiled or loaded; they keep
    # their folder), so nothing compiles the smoke step again.
    compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", saved)


@pytest.mark.slow  # the smoke experiment, its programs stored and loaded
def test_smoke_end_to_end_with_exact_resume(tmp_path, monkeypatch, capsys):
  # One test, so that pytest-xdist never compiles the smoke step in two workers.
  # The source digest held fixed: an edit of the tree during the test must not re-key the
  # stored programs (tests/runner/test_stored_programs.py checks the keying).
  monkeypatch.setattr(_stored_programs, "source_digest", lambda paths: "fixed")
  with _compilation_cache(tmp_path / "cache") as cache:
    workdir = tmp_path / "full"
    row = train.train(_config(), workdir)
    _check_outputs(workdir, row)
    stored = {p.name.split("-")[1] for p in (cache / "programs").glob("coevolution-*.exe")}
    # On one device a generation and its read-outs are one program each (issue 49 item 5).
    assert {"init", "generation", "readouts", "mixture_samples"} <= stored
    # As a new process would: the resumed run loads the stored executables (nothing traced)
    # and must reproduce the uninterrupted run bit for bit.
    train.programs.cache_clear()
    _check_resume(workdir, tmp_path / "resumed")
    progs = train.programs(_config())
    assert progs.generation.how == progs.readouts.how == progs.init.how == "loaded"
    _check_pre_lineage_checkpoint(workdir, tmp_path / "old", capsys)


def test_the_loops_programs_give_the_numbers_of_the_step_and_the_host_read_outs():
  # One device (issue 49 item 5): the generation program (fold_in and Coevolution.step in a
  # loop of one turn) gives the plain step's bits, and the read-out program the row entries,
  # per-cell metrics and samples of the read-outs computed from the grid (weight_distances,
  # cell_modes), here on the 25-Gaussian grid (some samples on its modes) with 48 samples a
  # cell (192 pooled: the high-quality rate a float32 division that is not a power of two's).
  from experiments.coevolution import generation_log as log
  from experiments.coevolution import generation_programs as gp
  from minmaxlab.gan import data, metrics

  config = _config()
  progs = train.programs(config)
  init_key, gen_key, eval_key = train.keys(config)
  state = progs.init(init_key)
  a = jax.device_get(progs.generation(gen_key, np.int32(3), np.int32(1), state, progs.exp.data))
  b = jax.device_get(progs.step(jax.random.fold_in(gen_key, 3), state, progs.exp.data))
  jax.tree.map(np.testing.assert_array_equal, a, b)
  mixture, n = data.grid25(), 48
  with config.unlocked():
    config.cell_samples = n
  cell = jax.jit(jax.vmap(jax.vmap(lambda x: metrics.mixture_metrics(x, mixture))))
  host = progs._replace(  # what cell_modes computes on the host, for this mixture and n
    exp=progs.exp._replace(mixture=mixture),
    cell_samples=jax.jit(gp.cell_samples(progs.exp.coev.pair, n)),
    cell_metrics=cell,
  )
  state, step_metrics = jax.tree.map(jax.numpy.asarray, a)
  key = jax.random.fold_in(eval_key, 0)
  readouts, layout = gp.make_readouts(progs.exp.coev, n, mixture)
  out = readouts(key, state, step_metrics)
  assert set(out) == {"packed", "samples"} and out["packed"].ndim == 1  # one vector: one transfer
  got_metrics, reads = layout(key, state, step_metrics)(jax.device_get(out["packed"]))
  for k, v in b[1].items():  # the step's metrics through the vector: same dtypes, shapes, bits
    assert got_metrics[k].dtype == v.dtype and got_metrics[k].shape == v.shape, k
    np.testing.assert_array_equal(got_metrics[k], v)
  per_cell, entries = log.readout_entries(reads, n)
  want = log.weight_distances(state.params, config.neighbourhood)
  samples, want_per_cell, modes = log.cell_modes(host, config, state)
  want.update(modes)
  assert list(entries.items()) == list(want.items())  # the same keys, order and values
  assert entries["grid/modes_covered"] > 0 and 0 < entries["grid/high_quality_rate"] < 1
  np.testing.assert_array_equal(out["samples"], samples)
  jax.tree.map(np.testing.assert_array_equal, per_cell, jax.device_get(want_per_cell))


def test_the_packed_read_outs_unpack_bit_for_bit_whatever_their_types():
  from experiments.coevolution import generation_programs as gp

  jnp = jax.numpy
  tree = {
    "flag": jnp.array([True, False, True]),
    "nan": jnp.array([np.nan, -0.0, np.inf, 1e-45], jnp.float32),
    "count": jnp.array(-7, jnp.int32),
    "id": jnp.array([[2**32 - 1, 5]], jnp.uint32),
    "half": jnp.array([0.1, 65504.0], jnp.bfloat16),
    "small": jnp.array([-128, 127], jnp.int8),
  }
  packed = jax.jit(lambda t: jnp.concatenate([gp._words(x) for x in jax.tree.leaves(t)]))(tree)
  back = gp._unpack(np.asarray(packed), jax.eval_shape(lambda: tree))
  for k, v in jax.device_get(tree).items():
    assert back[k].dtype == v.dtype and back[k].shape == v.shape, k
    assert back[k].tobytes() == np.asarray(v).tobytes(), k  # bit for bit (NaN, -0.0 too)
  with pytest.raises(ValueError, match="words"):
    gp._unpack(np.asarray(packed)[:-1], jax.eval_shape(lambda: tree))


def test_on_log_comes_before_the_generation_line(tmp_path, capsys):
  # Ctrl-C right after a generation's line must name that generation (runner.start_run's
  # interrupted line reads what on_log recorded).
  printed = []

  def on_log(generation, row):
    printed.append(f"generation {generation}/" in capsys.readouterr().err)

  train.train(_config(progress=True, generations=2), tmp_path, on_log=on_log)
  assert printed == [False, False]
  assert "generation 2/2" in capsys.readouterr().err


def _check_outputs(workdir, row):
  config = _config()
  rows = runner.read_jsonl(workdir / "metrics.jsonl")
  assert [r["generation"] for r in rows] == list(range(1, config.generations + 1))
  for r in rows:
    assert 0.0 <= r["best_score"] <= 1.0  # the mode-TVD score lies in [0, 1]
    assert np.asarray(r["cells/g_loss"]).shape == (2, 2)
    assert np.isfinite(r["g_loss"]) and np.isfinite(r["d_loss"]) and r["diverged"] == 0
    best = r["best_cell"]
    # The best cell is the one with the lowest mixture score.
    scores = np.asarray(r["cells/mixture_score"])
    assert scores[best[0], best[1]] == scores.min() == pytest.approx(r["best_score"])
    assert 0 <= r["mixture/modes_covered"] <= 8 and 0.0 <= r["mixture/high_quality_rate"] <= 1.0
    np.testing.assert_allclose(sum(r["mixture/weights"]), 1.0, atol=1e-3)
    for side in ("g", "d"):  # Lipizzaner's net_weights_dist, every generation
      assert r[f"net_weights_dist/{side}"] > 0
      assert np.asarray(r[f"cells/net_weights_dist_{side}"]).shape == (2, 2)
    # Lineages (issue 33): distinct ids among the grid's generators, every generation, and
    # on the ring each cell's mode count.
    ids = np.asarray(r["cells/lineage_g"])
    assert ids.shape == (2, 2, 1) and r["lineages"] == len(np.unique(ids))
    assert 1 <= r["lineages"] <= 4 and 1 <= r["lineages_d"] <= 4
    assert np.asarray(r["cells/modes_covered"]).shape == (2, 2)
  assert row["generation"] == config.generations
  # ... of the final state: the same numbers from the last checkpoint's generators
  from minmaxlab import coevolution as co

  final = _restore(workdir)[0]["state"]
  dist = np.asarray(co.net_weights_dist(final.params.min, config.neighbourhood))
  np.testing.assert_allclose(rows[-1]["cells/net_weights_dist_g"], dist, rtol=1e-5)
  np.testing.assert_array_equal(rows[-1]["cells/lineage_g"], final.lineage.min)
  # TensorBoard: grid means and pictures in tensorboard/, every cell a run of its own
  # (tensorboard/cells/r<i>c<j>, same tags: the curves overlay).
  scalars = _scalars(workdir / "tensorboard")
  assert [s for s, _ in scalars["best_score"]] == list(range(1, config.generations + 1))
  images = [
    (s, tag)
    for f in (workdir / "tensorboard").glob("events.out.tfevents.*")
    for s, tag, kind, _ in runner.read_events(f)
    if kind == "image"
  ]
  assert {(config.generations, "samples/mixture"), (config.generations, "samples/cells")} <= set(
    images
  )
  cells = {
    f"{tag}/{d.name}": v
    for d in sorted((workdir / "tensorboard" / "cells").iterdir())
    for tag, v in _scalars(d).items()
  }
  assert {"g_loss/r0c0", "g_loss/r1c1", "mixture_score/r0c1"} <= set(cells)
  np.testing.assert_allclose(cells["g_loss/r1c0"][-1][1], rows[-1]["cells/g_loss"][1][0], rtol=1e-6)
  # Pictures, curves, checkpoints (generation 0, every checkpoint_every, the end), summary.
  for g in range(1, config.generations + 1):
    assert (workdir / "samples" / f"cells_gen_{g}.png").stat().st_size > 1000
    assert (workdir / "samples" / f"mixture_gen_{g}.png").stat().st_size > 1000
  assert (workdir / "metrics.png").stat().st_size > 1000
  assert runner.CheckpointManager(workdir / "checkpoints").steps() == [0, 2, 4]
  tree, meta = _restore(workdir)
  assert meta["step"] == 4 and int(tree["state"].generation) == 4
  np.testing.assert_array_equal(
    tree["key"], np.asarray(jax.random.key_data(jax.random.key(config.seed)))
  )
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["grid"] == [2, 2] and summary["generations"] == 4
  # The final report a person reads.
  text = train.report(rows[-1], workdir / "summary.json")
  assert "grid 2x2" in text and "modes covered" in text and "high-quality rate" in text


def _check_resume(full_dir, workdir):
  def stop(generation, row):
    if generation == 3:  # after the checkpoint of generation 2: row 3 must be recomputed
      raise Interrupt

  with pytest.raises(Interrupt):
    train.train(_config(), workdir, on_log=stop)
  assert runner.CheckpointManager(workdir / "checkpoints").steps() == [0, 2]
  assert len(runner.read_jsonl(workdir / "metrics.jsonl")) == 3
  with pytest.raises(ValueError, match="--resume"):
    train.train(_config(), workdir)
  # A resume with another config is refused in one line naming the field (the seed, or what
  # builds the networks), before any checkpoint is read; the loop's length may change.
  with pytest.raises(ValueError, match=r"another config \(seed: 0 -> 1\)"):
    train.train(_config(seed=1), workdir, resume=True)
  with pytest.raises(ValueError, match="initializer: 'fan_in_uniform' -> 'torch'"):
    train.train(_config(initializer="torch"), workdir, resume=True)
  train.train(_config(), workdir, resume=True)
  assert _strip(runner.read_jsonl(workdir / "metrics.jsonl")) == _strip(
    runner.read_jsonl(full_dir / "metrics.jsonl")
  )
  a, _ = _restore(full_dir)
  b, _ = _restore(workdir)
  chex.assert_trees_all_equal(a, b)
  # The grid really trained: parameters moved away from the initial ones.
  init, _ = _restore(full_dir, 0)
  g0 = jax.tree.leaves(init["state"].params.min)[0]
  g4 = jax.tree.leaves(a["state"].params.min)[0]
  assert not np.allclose(g0, g4)


def _check_pre_lineage_checkpoint(full_dir, workdir, capsys):
  """A checkpoint written before lineage ids (no ``state.lineage``) resumes: each
  individual starts a lineage at its cell and the checkpoint's generation (one line), and
  every other number is the uninterrupted run's."""
  from minmaxlab import coevolution as co

  tree, _ = _restore(full_dir, 2)
  old = {"state": tree["state"]._replace(lineage=None), "key": tree["key"]}
  runner.CheckpointManager(Path(workdir) / "checkpoints").save(2, old)
  (Path(workdir) / "config.json").write_text((Path(full_dir) / "config.json").read_text())
  capsys.readouterr()
  train.train(_config(), workdir, resume=True)
  assert "step_2 was written before lineage ids" in capsys.readouterr().err
  a, _ = _restore(full_dir)
  b, _ = _restore(workdir)
  chex.assert_trees_all_equal(a["state"]._replace(lineage=None), b["state"]._replace(lineage=None))
  cell, born = co.lineage_origin(b["state"].lineage.min)
  assert np.all(born == 2) and set(np.unique(cell)) <= set(range(4))


def test_bad_configs_are_rejected():
  with pytest.raises(ValueError, match="generations"):
    train.check_config(_config(generations=0))
  with pytest.raises(ValueError, match="tournament_size"):
    train.check_config(_config(tournament_size=0))


def test_cli_parses_overrides_and_rejects_bad_grid(tmp_path):
  # Fails in check_config, before anything is compiled: cheap, and proves the flag plumbing.
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg"}
  env.pop("JAX_NUM_CPU_DEVICES", None)
  cmd = [
    sys.executable,
    "-m",
    "experiments.coevolution.main",
    "--config",
    str(ROOT / "experiments/coevolution/configs/smoke.py"),
    "--workdir",
    str(tmp_path),
    "--config.rows=0",
  ]
  proc = _procs.run(cmd, cwd=ROOT, env=env, timeout=300)
  assert proc.returncode != 0
  assert "rows must be an integer >= 1, got 0" in proc.stderr


def test_main_job_comparison_with_single_gan_baseline(tmp_path):
  # The end of the main job: the grid against one GAN with the grid's total steps (run here,
  # then read back from the cache), two comparison lines and the side-by-side picture.
  from experiments.coevolution import compare

  config = _config()
  base = compare.baseline_config(config)
  assert (base.rows, base.cols) == (1, 1)
  assert base.steps_per_generation == 4 * config.steps_per_generation
  assert base.generations == config.generations and base.seed == config.seed
  # a plain GAN: every evolutionary operator off
  assert (base.selection, base.n_replacements, base.mutation_probability) == (False, 0, 0.0)
  row = train.train(config, tmp_path)
  assert compare.compare(config, tmp_path, row)[0].startswith("(no single-GAN baseline")
  lines = compare.compare(config, tmp_path, row, run_baseline=True)
  assert lines[0].startswith("grid 2x2 (4 GANs x 5 steps per generation): best mixture ")
  assert "all cells pooled" in lines[0] and "/8 modes, high-quality " in lines[0]
  assert lines[0].endswith("[Lipizzaner's tournament selection of 2]")  # the coupling, named
  # comparison.png's lineage panel: the run's distinct generator lineages per generation
  gens, counts, cells = compare.lineage_curve(config, tmp_path)
  assert cells == 4 and list(gens) == list(range(config.generations + 1)) and counts[0] == 4
  assert list(counts[1:]) == [r["lineages"] for r in runner.read_jsonl(tmp_path / "metrics.jsonl")]
  assert lines[1].startswith("one GAN with the same total steps (20 per generation): ")
  assert "/8 modes, high-quality " in lines[1]
  assert lines[2].startswith("verdict") and "one GAN" in lines[2] and "ring_v1" in lines[2]
  picture = tmp_path / "comparison.png"
  assert picture.stat().st_size > 5000 and lines[3].endswith(str(picture))
  base_rows = runner.read_jsonl(tmp_path / compare.BASELINE_DIR / "metrics.jsonl")
  assert [r["generation"] for r in base_rows] == list(range(1, config.generations + 1))
  assert f"{base_rows[-1]['mixture/modes_covered']}/8 modes" in lines[1]
  assert f"{row['mixture/modes_covered']}/8 modes" in lines[0]
  # the baseline ran with its operators off: its learning rate never moved
  assert all(r["lr_g"] == pytest.approx(config.learning_rate, rel=1e-6) for r in base_rows)
  # Cached: a second call reads the finished baseline (same lines, no new run).
  picture.unlink()
  assert compare.compare(config, tmp_path, row) == lines and picture.exists()
  assert len(runner.read_jsonl(tmp_path / compare.BASELINE_DIR / "metrics.jsonl")) == len(base_rows)
  # A baseline of another config is not reused.
  assert compare.cached_baseline(_config(seed=1), tmp_path) is None


def test_without_selection_the_trained_individuals_are_kept():
  # Lipizzaner with enable_selection off trains each cell's own pair in place and only
  # re-scores it; a replacement test that threw the training away when the re-score was
  # worse froze the discriminators of the issue-18 study's "no selection" runs.
  from minmaxlab import coevolution as co
  from minmaxlab.gan import data, metrics, models

  ring = data.ring8()
  cfg = co.CoevolutionConfig(
    rows=1, cols=2, selection=False, batch_size=16, steps_per_generation=2,
    fitness_samples=16, mixture_samples=16, mutation_probability=0.0, learning_rate=1e-2,
  )  # fmt: skip
  pair = models.make_pair("mlp", (2,), latent_dim=4, hidden=(8,))
  coev = co.Coevolution(cfg, pair, sample_real=lambda d, k, n: d.sample(k, n),
                        score_fn=metrics.mode_tvd_score)  # fmt: skip
  step = jax.jit(coev.step)
  state = coev.init(jax.random.key(0))
  for g in range(4):
    new, m = step(jax.random.key(g), state, ring)
    assert np.all(np.asarray(m["replaced_g"]) == 1) and np.all(np.asarray(m["replaced_d"]) == 1)
    for old, now in zip(jax.tree.leaves(state.params), jax.tree.leaves(new.params)):
      assert not np.any(np.all(np.isclose(old, now).reshape(2, -1), axis=1))  # every cell moved
    state = new


def test_load_run_opens_a_checkpoint_from_before_lineage_ids(tmp_path, capsys):
  """``runner.load_run`` restores as a resume does (the trainer's ``restore_run``): a run whose
  checkpoint has no lineage ids opens, each individual starting a lineage at its cell and the
  checkpoint's generation, the other numbers as saved. Nothing is compiled but ``init``."""
  from minmaxlab import coevolution as co

  config = _config()
  runner.write_config(tmp_path, config, module=train.__name__)
  state = jax.jit(train.build(config).coev.init)(train.keys(config)[0])
  state = state._replace(generation=np.int32(3))
  key = np.asarray(jax.random.key_data(jax.random.key(config.seed)))
  old = {"state": state._replace(lineage=None), "key": key}
  runner.CheckpointManager(tmp_path / "checkpoints").save(3, old)
  capsys.readouterr()
  run = runner.load_run(tmp_path)
  assert "step_3 was written before lineage ids" in capsys.readouterr().err
  assert run.step == 3
  chex.assert_trees_all_equal(run.state["state"]._replace(lineage=None), old["state"])
  cell, born = co.lineage_origin(run.state["state"].lineage.min)
  assert np.all(born == 3)
  np.testing.assert_array_equal(
    cell[..., 0], np.arange(config.rows * config.cols).reshape(config.rows, config.cols)
  )


# ``--config.neighbourhood`` takes the radius and user-given forms (strings, so that a flag can
# carry them).
def test_config_accepts_radius_and_custom_neighbourhoods():
  c = smoke.get_config()
  for kind, members in (("moore:2", 25), ("von_neumann:2", 13), ("custom:0,0;1,1;-2,0", 3)):
    c.neighbourhood = kind
    train.check_config(c)
    assert coevolution_config(c).num_members == members


def test_cli_passes_the_custom_string_through_and_rejects_it_in_one_line(tmp_path):
  # A duplicate offset fails in check_config, before anything is compiled: the error
  # names the value, so the whole string (';' and '-' included) reached the library.
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg"}
  env.pop("JAX_NUM_CPU_DEVICES", None)
  cmd = [
    sys.executable,
    "-m",
    "experiments.coevolution.main",
    "--config",
    str(ROOT / "experiments/coevolution/configs/smoke.py"),
    "--workdir",
    str(tmp_path / "run"),
    "--config.neighbourhood=custom:0,0;-2,1;-2,1",
  ]
  proc = _procs.run(cmd, timeout=300, env=env)
  assert proc.returncode == 1
  lines = proc.stderr.strip().splitlines()
  assert lines[-1] == (
    "ERROR: ValueError: neighbourhood 'custom:0,0;-2,1;-2,1': offset (-2, 1) appears twice"
  ), proc.stderr[-2000:]
