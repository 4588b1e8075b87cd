"""Tests of minmaxlab.runner: atomic checkpoints, JSONL/TensorBoard, progress, plots."""

import io
import json
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import minmaxlab
from minmaxlab import runner
from minmaxlab.runner._checkpoint import CheckpointError


def _state(scale=1.0):
  params = minmaxlab.Players({"w": jnp.full((3, 2), scale)}, {"b": jnp.arange(4.0) * scale})
  tx = minmaxlab.lookahead_minmax(optax.adam(1e-3), sync_period=3)
  return (jnp.int32(7), params, tx.init(params))


def test_checkpoint_roundtrip_keeps_types_and_last_n(tmp_path):
  ckpt = runner.CheckpointManager(tmp_path / "ck", max_to_keep=2)
  assert ckpt.latest_step() is None
  for s in (0, 10, 20):
    ckpt.save(s, _state(float(s)), metadata={"note": f"s{s}"})
  assert ckpt.steps() == [10, 20]
  target = jax.eval_shape(lambda: _state())
  restored, meta = ckpt.restore(target)
  chex.assert_trees_all_equal(restored, _state(20.0), strict=True)
  assert isinstance(restored[1], minmaxlab.Players)
  assert isinstance(restored[2], minmaxlab.LookaheadMinmaxState)
  assert meta == {"step": 20, "note": "s20"}
  old, _ = ckpt.restore(target, step=10)
  chex.assert_trees_all_equal(old, _state(10.0), strict=True)
  with pytest.raises(FileNotFoundError):
    ckpt.restore(target, step=0)


@pytest.mark.parametrize("damage", ["meta", "state_bytes", "state_missing_file"])
def test_damaged_latest_checkpoint_falls_back_to_the_newest_intact_one(tmp_path, damage):
  ckpt = runner.CheckpointManager(tmp_path / "ck", max_to_keep=None)
  for s in (0, 10, 20):
    ckpt.save(s, _state(float(s)))
  latest = ckpt.path(20)
  if damage == "meta":
    (latest / "meta.json").write_text('{"step": 20, "state_sha')  # torn JSON
  else:
    files = sorted(p for p in (latest / "state").rglob("*") if p.is_file() and p.stat().st_size)
    victim = max(files, key=lambda p: p.stat().st_size)
    if damage == "state_bytes":
      data = bytearray(victim.read_bytes())
      data[len(data) // 2] ^= 0xFF  # one flipped byte
      victim.write_bytes(bytes(data))
    else:
      victim.unlink()
  assert ckpt.verify(10) is None and ckpt.verify(20) is not None
  lines = []
  restored, meta = ckpt.restore(jax.eval_shape(lambda: _state()), log=lines.append)
  chex.assert_trees_all_equal(restored, _state(10.0), strict=True)
  assert meta == {"step": 10}
  assert len(lines) == 1 and str(latest) in lines[0] and "trying step_10" in lines[0]
  assert "\n" not in lines[0]
  with pytest.raises(CheckpointError, match="damaged"):
    ckpt.restore(jax.eval_shape(lambda: _state()), step=20)


def test_no_restorable_checkpoint_is_one_line(tmp_path):
  ckpt = runner.CheckpointManager(tmp_path / "ck", max_to_keep=None)
  ckpt.save(0, _state())
  ckpt.save(5, _state())
  other = {"w": jax.ShapeDtypeStruct((5,), jnp.float32)}  # another architecture
  lines = []
  with pytest.raises(CheckpointError) as e:
    ckpt.restore(other, log=lines.append)
  assert "\n" not in str(e.value) and "fresh workdir" in str(e.value)
  assert len(lines) == 2  # each checkpoint named once


class _Killed(Exception):
  """Stands for the process dying at that instant."""


def test_kill_mid_write_leaves_last_good_checkpoint(tmp_path, monkeypatch):
  import os

  ckpt = runner.CheckpointManager(tmp_path, max_to_keep=3)
  ckpt.save(5, _state(5.0))
  # Killed while orbax writes: its files are in place, orbax's final rename never happens.
  real_rename = os.rename

  def killed(src, dst, *a, **kw):
    if ".orbax-checkpoint-tmp" in str(src):
      raise _Killed("before orbax's rename")
    return real_rename(src, dst, *a, **kw)

  monkeypatch.setattr(os, "rename", killed)
  with pytest.raises(_Killed):
    ckpt.save(6, _state(6.0))
  monkeypatch.setattr(os, "rename", real_rename)
  assert ckpt.steps() == [5]
  assert [p for p in tmp_path.iterdir() if ".orbax-checkpoint-tmp" in p.name]
  # Killed after orbax committed step 7 but before its SHA-256 was recorded.
  real_path_rename = Path.rename

  def killed_late(self, target):
    if self.name.startswith(".tmp-sha256"):
      raise _Killed("before the digest's rename")
    return real_path_rename(self, target)

  monkeypatch.setattr(Path, "rename", killed_late)
  with pytest.raises(_Killed):
    ckpt.save(7, _state(7.0))
  monkeypatch.setattr(Path, "rename", real_path_rename)
  # ... and a temporary folder of the earlier layout holding a truncated file.
  junk = tmp_path / ".tmp-step_8-deadbeef" / "state"
  junk.mkdir(parents=True)
  (junk / "manifest.ocdbt").write_bytes(b"\x00\x01trunc")
  fresh = runner.CheckpointManager(tmp_path, max_to_keep=3)  # a new process
  assert fresh.steps() == [5, 7]
  assert "cut off" in fresh.verify(7)
  lines = []
  restored, meta = fresh.restore(jax.eval_shape(lambda: _state()), log=lines.append)
  chex.assert_trees_all_equal(restored, _state(5.0), strict=True)
  assert meta["step"] == 5 and len(lines) == 1 and "step_7" in lines[0]
  fresh.save(6, _state(6.0))  # the resumed run: cleans the leftovers, supersedes step 7
  assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") or "tmp" in p.name]
  assert fresh.steps() == [5, 6]
  restored, meta = fresh.restore(jax.eval_shape(lambda: _state()))
  chex.assert_trees_all_equal(restored, _state(6.0), strict=True)


def test_checkpoints_are_orbax_managed_and_keep_64_bit_dtypes(tmp_path):
  import orbax.checkpoint as ocp

  tree = {
    "f64": np.linspace(0.0, 1.0, 5) / 3.0,  # float64, not representable as float32
    "i64": np.array([2**40, -3], dtype=np.int64),
    "f32": jnp.arange(3.0),
  }
  ckpt = runner.CheckpointManager(tmp_path, max_to_keep=2)
  for s in (1, 2, 3):
    ckpt.save(s, tree, metadata={"s": s})
  # orbax's own manager reads the folder: the same steps, the same metadata
  with ocp.CheckpointManager(
    tmp_path, options=ocp.CheckpointManagerOptions(step_prefix="step")
  ) as m:
    assert list(m.all_steps()) == [2, 3]
    item = m.restore(3, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    assert item["meta"] == {"step": 3, "s": 3}
  assert not jax.config.jax_enable_x64
  for target in (tree, jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)):
    back, meta = ckpt.restore(target)
    assert meta == {"step": 3, "s": 3}
    assert back["f64"].dtype == np.float64 and back["i64"].dtype == np.int64
    np.testing.assert_array_equal(back["f64"], tree["f64"])
    np.testing.assert_array_equal(back["i64"], tree["i64"])
    assert isinstance(back["f32"], jax.Array) and back["f32"].dtype == jnp.float32
  # re-saving an earlier step supersedes the later ones
  ckpt.save(2, {**tree, "f32": jnp.zeros(3)})
  assert ckpt.steps() == [2]
  back, _ = ckpt.restore(tree)
  np.testing.assert_array_equal(back["f32"], np.zeros(3))


def test_checkpoints_of_the_earlier_layout_are_verified_and_read(tmp_path):
  """Before orbax's manager: step_<n>/state (StandardCheckpointer) and step_<n>/meta.json
  holding the SHA-256 of state/'s files."""
  import hashlib

  import orbax.checkpoint as ocp

  def legacy(step, tree):
    folder = tmp_path / f"step_{step}"
    folder.mkdir()
    with ocp.StandardCheckpointer() as c:
      c.save(folder / "state", tree)
      c.wait_until_finished()
    h = hashlib.sha256()
    for f in sorted(p for p in (folder / "state").rglob("*") if p.is_file()):
      h.update(str(f.relative_to(folder / "state")).encode() + b"\0" + f.read_bytes() + b"\0")
    meta = {"step": step, "note": "old", "state_sha256": h.hexdigest()}
    (folder / "meta.json").write_text(json.dumps(meta))

  legacy(3, {"w": np.arange(4.0, dtype=np.float32)})
  legacy(4, {"w": np.arange(4.0, dtype=np.float32) + 1})
  ckpt = runner.CheckpointManager(tmp_path, max_to_keep=None)
  assert ckpt.steps() == [3, 4] and ckpt.verify(3) is None and ckpt.verify(4) is None
  assert ckpt.metadata(3) == {"step": 3, "note": "old"}
  victim = max(
    (p for p in (tmp_path / "step_4" / "state").rglob("*") if p.is_file()),
    key=lambda p: p.stat().st_size,
  )
  data = bytearray(victim.read_bytes())
  data[-1] ^= 0xFF  # one flipped byte
  victim.write_bytes(bytes(data))
  assert "checksum" in ckpt.verify(4)
  lines = []
  back, meta = ckpt.restore({"w": jax.ShapeDtypeStruct((4,), jnp.float32)}, log=lines.append)
  np.testing.assert_array_equal(back["w"], np.arange(4.0))
  assert meta == {"step": 3, "note": "old"} and len(lines) == 1 and "step_4" in lines[0]
  ckpt.save(4, {"w": jnp.full(4, 7.0)})  # the new layout replaces the damaged one
  assert ckpt.verify(4) is None and not (tmp_path / "step_4" / "meta.json").exists()


def test_metric_writer_jsonl_and_tensorboard(tmp_path):
  with runner.MetricWriter(tmp_path) as w:
    w.write(10, {"g_loss": np.float32(0.5), "fid": jnp.asarray(12.25), "note": "x"})
    w.write(20, {"g_loss": 0.25, "fid": float("nan"), "w": [1.0, float("inf")]})
    w.write_runs(20, {"cells/r0c0": {"g_loss": 0.125}, "cells/r0c1": {"g_loss": 0.375}})
    w.image(20, "samples", np.linspace(0.0, 1.0, 6 * 8).reshape(6, 8))
  # NaN and infinities are JSON null (strict parsers reject NaN tokens).
  text = (tmp_path / "metrics.jsonl").read_text()
  assert "NaN" not in text and "Infinity" not in text
  rows = runner.read_jsonl(tmp_path / "metrics.jsonl")
  assert rows == [
    {"step": 10, "g_loss": 0.5, "fid": 12.25, "note": "x"},
    {"step": 20, "g_loss": 0.25, "fid": None, "w": [1.0, None]},
  ]
  (event_file,) = (tmp_path / "tensorboard").glob("events.out.tfevents.*")
  scalars = runner.read_scalars(event_file)
  assert (10, "g_loss", 0.5) in scalars and (10, "fid", 12.25) in scalars
  assert (20, "g_loss", 0.25) in scalars
  assert all(tag != "note" for _, tag, _ in scalars)
  # The real TensorBoard reads the same: scalars, the image, and the cells as runs whose
  # `g_loss` overlays the main run's.
  from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

  main = EventAccumulator(str(tmp_path / "tensorboard"))
  main.Reload()
  assert [(e.step, e.value) for e in main.Scalars("g_loss")] == [(10, 0.5), (20, 0.25)]
  (img,) = main.Images("samples")
  assert (img.step, img.height, img.width) == (20, 6, 8)
  assert img.encoded_image_string.startswith(b"\x89PNG")
  for cell, value in (("r0c0", 0.125), ("r0c1", 0.375)):
    acc = EventAccumulator(str(tmp_path / "tensorboard" / "cells" / cell))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("g_loss")] == [(20, value)]


def test_metric_writer_resume_drops_rows_after_checkpoint(tmp_path):
  with runner.MetricWriter(tmp_path, tensorboard=False) as w:
    for s in (10, 20, 30):
      w.write(s, {"a": s})
  with open(tmp_path / "metrics.jsonl", "a") as f:
    f.write('{"step": 40, "a"')  # a line cut short by a kill
  with runner.MetricWriter(tmp_path, tensorboard=False, resume_step=20) as w:
    w.write(30, {"a": 31})
  assert [r["a"] for r in runner.read_jsonl(tmp_path / "metrics.jsonl")] == [10, 20, 31]
  with runner.MetricWriter(tmp_path, tensorboard=False) as w:  # a fresh run starts over
    pass
  assert runner.read_jsonl(tmp_path / "metrics.jsonl") == []


def test_metric_writer_step_key_generation_reads_older_step_rows(tmp_path):
  # Coevolution rows count generations; files written before (with "step") still resume.
  (tmp_path / "metrics.jsonl").write_text('{"step": 1, "a": 1}\n{"step": 2, "a": 2}\n')
  with runner.MetricWriter(tmp_path, tensorboard=True, resume_step=1, step_key="generation") as w:
    assert w.write(2, {"a": 3}) == {"generation": 2, "a": 3}
  rows = runner.read_jsonl(tmp_path / "metrics.jsonl")
  assert rows == [{"step": 1, "a": 1}, {"generation": 2, "a": 3}]
  (event_file,) = (tmp_path / "tensorboard").glob("events.out.tfevents.*")
  assert [tag for _, tag, _ in runner.read_scalars(event_file)] == ["a"]  # not the counter
  assert runner.save_metric_curves(tmp_path / "m.png", rows) == ["a"]
  assert runner.save_metric_curves(tmp_path / "n.png", [{"step": 1, "a": 1.0}]) == ["a"]


def test_resumed_tensorboard_purges_the_replayed_steps(tmp_path):
  from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

  with runner.MetricWriter(tmp_path) as w:
    for s in (10, 20, 30, 40):  # a run killed after step 40, checkpoint at 20
      w.write(s, {"g_loss": float(s)})
      w.write_runs(s, {"cells/r0c0": {"g_loss": float(s)}})
  with runner.MetricWriter(tmp_path, resume_step=20) as w:
    for s in (30, 40, 50):  # the resumed run writes 30 and 40 again
      w.write(s, {"g_loss": s + 0.5})
      w.write_runs(s, {"cells/r0c0": {"g_loss": s + 0.5}})
  want = [(10, 10.0), (20, 20.0), (30, 30.5), (40, 40.5), (50, 50.5)]
  for run in ("", "cells/r0c0"):
    acc = EventAccumulator(str(tmp_path / "tensorboard" / run))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("g_loss")] == want


class _Tty(io.StringIO):
  def isatty(self):
    return True


def test_progress_bar_plain_and_tty():
  plain = io.StringIO()
  bar = runner.ProgressBar(100, stream=plain)
  bar.update(50, {"loss_min": 0.5}, {"fid": 3.0})
  bar.update(100, {"loss_min": 0.25})
  bar.close()
  lines = plain.getvalue().splitlines()
  assert len(lines) == 2 and "\r" not in plain.getvalue()
  assert lines[0].startswith("step 50/100") and "steps/s" in lines[0] and "fid=3" in lines[0]
  assert "fid=3" in lines[1]  # the latest metric stays on show
  assert "ETA" not in lines[0] and "ETA 00:00" in lines[1]  # paced from the first update
  bar = runner.ProgressBar(40, start=0, stream=io.StringIO())
  bar.update(10)
  bar._first = (10, 100.0)  # the first update (with compilation) at t = 100 s
  assert bar.eta(20, now=120.0) == pytest.approx(40.0)  # 2 s per step since, 20 steps left
  tty = _Tty()
  bar = runner.ProgressBar(10, stream=tty)  # a tqdm bar on terminals
  bar.update(5, {"loss_max": 1.0})
  bar.close()
  assert "5/10" in tty.getvalue() and "loss_max=1" in tty.getvalue()


def test_plots_write_pngs(tmp_path):
  import matplotlib.image

  imgs = np.linspace(-1, 1, 10 * 8 * 8).reshape(10, 8, 8, 1)
  grid = runner.image_grid(imgs, ncols=5)
  assert grid.shape == (2 * 9 + 1, 5 * 9 + 1) and grid.dtype == np.uint8
  assert grid[1, 1] == 0 and grid[0, 0] == 255  # -1 -> black pixel; padding white
  runner.save_image_grid(tmp_path / "g.png", imgs)
  runner.save_image_grid(tmp_path / "rgb.png", np.zeros((4, 5, 5, 3)))
  assert matplotlib.image.imread(tmp_path / "g.png").shape[:2] == (3 * 9 + 1, 4 * 9 + 1)
  runner.save_scatter(
    tmp_path / "s.png", np.random.default_rng(0).normal(size=(50, 2)), modes=np.eye(2)
  )
  rows = [{"step": s, "loss": 1.0 / s, "fid": 10.0 - s, "tag": "x"} for s in range(1, 6)]
  assert runner.save_metric_curves(tmp_path / "m.png", rows) == ["fid", "loss"]
  for name in ("g.png", "rgb.png", "s.png", "m.png"):
    assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  json.dumps(rows)
