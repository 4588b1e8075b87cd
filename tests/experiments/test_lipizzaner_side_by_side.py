"""experiments/benchmarks/lipizzaner_side_by_side.py against a stand-in Lipizzaner checkout
(tests/experiments/data/fake_lipizzaner: Lipizzaner's CLI, port choice and log lines, no
training), so the protocol's preparation, process handling and arithmetic run for real."""

import gzip
import json
import socket
import sys
from pathlib import Path

import pytest

from tests import _procs

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments/benchmarks/lipizzaner_side_by_side.py"
FAKE = ROOT / "tests/experiments/data/fake_lipizzaner"


def _ports_free() -> bool:
  for port in range(5000, 5004):
    with socket.socket() as s:
      s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as flask binds
      try:
        s.bind(("127.0.0.1", port))
      except OSError:
        return False
  return True


def _idx(folder: Path) -> Path:
  """Tiny MNIST-format files, gzipped as Debian ships them (the content is not read)."""
  folder.mkdir()
  for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
    (folder / f"{name}.gz").write_bytes(gzip.compress(b"\x00\x00\x08\x03" + bytes(16)))
  for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
    (folder / name).write_bytes(b"\x00\x00\x08\x01" + bytes(8))
  return folder


def _floor_json(path: Path) -> Path:
  prog = {"median_s": 2.0, "cpu_s_median": 3.0, "matmul_gflop_per_generation": 1110.94}
  prog["ratio_to_floor_median"] = 0.99
  line = {"machine": {"cpu_model": "test"}, "programs": {"map_s600_d2": prog}}
  path.write_text("# progress\n" + json.dumps(line) + "\n")
  return path


def _left_running(src: Path) -> list[int]:
  """Processes running a ``main.py`` in ``src`` (the clients and the master)."""
  out = []
  for pid in _procs.pids_with_args("main.py", "--distributed"):
    try:
      if Path(f"/proc/{pid}/cwd").resolve() == src.resolve():
        out.append(pid)
    except OSError:
      pass
  return out


def test_side_by_side_runs_the_protocol_and_divides(tmp_path):
  if not _ports_free():
    pytest.skip("ports 5000-5003 are in use on this machine")
  work = tmp_path / "work"
  cmd = [sys.executable, str(SCRIPT), "--lipizzaner", str(FAKE), "--python", sys.executable]
  cmd += ["--iterations", "3", "--idx", str(_idx(tmp_path / "idx")), "--workdir", str(work)]
  cmd += ["--floor_json", str(_floor_json(tmp_path / "floor.json")), "--timeout_s", "120"]
  cmd += ["--check_imports", "json"]  # the stand-in needs no torch
  out = _procs.run(cmd, timeout=240)
  assert out.returncode == 0, out.stderr[-2000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  lip = result["lipizzaner"]
  # 4 clients x (3 - 1) intervals; an iteration is 3 batches of 0.2 CPU-seconds per client
  assert len(lip["seconds_per_iteration"]) == 8 and lip["batches_per_iteration"] == 3
  assert 0.5 < lip["median_s"] < 20 and lip["min_s"] <= lip["median_s"] <= lip["max_s"]
  assert 1.8 < lip["client_cpu_s_per_generation"] < 3.6  # 4 clients x 0.6 CPU-s
  assert 0.29 < lip["fid_s_median"] < 2  # the stand-in's 0.3 s score, read from its log
  assert lip["median_s_without_fid"] < lip["median_s"]
  assert result["wall_ratio_without_fid"] == pytest.approx(
    lip["median_s_without_fid"] / 2.0, abs=0.01
  )
  assert result["minmaxlab"]["median_s"] == 2.0
  assert result["wall_ratio"] == pytest.approx(lip["median_s"] / 2.0, abs=0.01)
  assert result["cpu_ratio"] == pytest.approx(lip["client_cpu_s_per_generation"] / 3.0, abs=0.01)
  # the copy is patched and configured; the user's checkout is not touched
  src = work / "src"
  assert "Normalize(mean=(0.5,), std=(0.5,))" in (src / "data/data_loader.py").read_text()
  assert "(0.5, 0.5, 0.5)" in (FAKE / "src/data/data_loader.py").read_text()
  config = (src / "configuration/lipizzaner-gan/side_by_side.yml").read_text()
  assert "n_iterations: 3" in config and "cuda: True" not in config
  assert "calculate_score: False" in config and "general_side_by_side.yml" in config
  general = (src / "configuration/general_side_by_side.yml").read_text()
  assert f"output_dir: {work / 'output'}" in general
  raw = work / "output/data/MNIST/raw"
  assert (raw / "train-images-idx3-ubyte").read_bytes()[:4] == b"\x00\x00\x08\x03"
  # every client and the master were stopped: nothing of the run is left
  assert _left_running(src) == []
  assert _ports_free()


@pytest.mark.parametrize(
  "extra, needle",
  [
    (["--lipizzaner", "/nonexistent"], "--lipizzaner /nonexistent: no Lipizzaner checkout"),
    (["--lipizzaner", str(FAKE), "--iterations", "1"], "--iterations 1: need at least 2"),
    (["--lipizzaner", str(FAKE), "--python", "/nonexistent/python"], "--python /nonexistent"),
  ],
)
def test_bad_input_is_one_line_and_status_2(tmp_path, extra, needle):
  out = _procs.run([sys.executable, str(SCRIPT), *extra, "--workdir", str(tmp_path)], timeout=120)
  assert out.returncode == 2, (out.stdout, out.stderr)
  (line,) = out.stderr.strip().splitlines()
  assert line.startswith("lipizzaner_side_by_side: ")
  assert needle in out.stderr and "Traceback" not in out.stderr
  assert not (tmp_path / "src").exists()


def test_missing_idx_files_are_named(tmp_path):
  if not _ports_free():
    pytest.skip("ports 5000-5003 are in use on this machine")
  (tmp_path / "idx").mkdir()
  cmd = [sys.executable, str(SCRIPT), "--lipizzaner", str(FAKE), "--python", sys.executable]
  cmd += ["--idx", str(tmp_path / "idx"), "--workdir", str(tmp_path / "w")]
  cmd += ["--check_imports", "json"]
  out = _procs.run(cmd, timeout=120)
  assert out.returncode == 2 and "no train-images-idx3-ubyte" in out.stderr
  assert len(out.stderr.strip().splitlines()) == 1


def test_without_a_checkout_it_says_it_skipped():
  out = _procs.run([sys.executable, str(SCRIPT)], timeout=60)
  assert out.returncode == 0 and out.stderr == ""
  result = json.loads(out.stdout)
  assert result["benchmark"] == "lipizzaner_side_by_side" and "--lipizzaner" in result["skipped"]
