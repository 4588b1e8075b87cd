"""tests/_suite_profile.py: the opt-in plugin records each test's CPU, its children's CPU and
JAX's compiles, and its report ranks them."""

import json
import os
import sys
import textwrap

from tests import _procs, _suite_profile

CASE = """
import subprocess, sys, time
import jax, jax.numpy as jnp

def test_compiles():
  jax.jit(lambda x: jnp.cos(x) @ x.T)(jnp.ones((8, 8))).block_until_ready()

def test_starts_a_child():
  subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)

def test_waits():
  time.sleep(0.5)
"""


def test_plugin_records_tests_children_and_compiles_and_the_report_ranks_them(tmp_path):
  (tmp_path / "test_case.py").write_text(textwrap.dedent(CASE))
  out = tmp_path / "profile.jsonl"
  env = dict(os.environ, PYTHONPATH=str(_procs.ROOT), **{_suite_profile.ENV: str(out)})
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
  cmd += ["-p", "tests._suite_profile", "--rootdir", str(tmp_path), str(tmp_path)]
  r = _procs.run(cmd, timeout=_procs.scaled(120), cwd=tmp_path, env=env)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
  (line,) = [json.loads(x) for x in out.read_text().splitlines()]  # one process, one line
  tests = line["tests"]
  compiles = next(v for k, v in tests.items() if k.endswith("::test_compiles"))
  child = next(v for k, v in tests.items() if k.endswith("::test_starts_a_child"))
  assert compiles["compiles"] >= 1 and compiles["compile_s"] > 0 and compiles["lower_s"] > 0
  # JAX times a compile by the clock, not the CPU: under load it can exceed the CPU used
  assert compiles["cpu_s"] > 0 and not compiles.get("children_cpu_s")
  assert child["children_cpu_s"] > 0.05 and not child.get("compiles")  # the child's own CPU
  waits = next(v for k, v in tests.items() if k.endswith("::test_waits"))
  assert waits["wall_s"] >= 0.5 and waits["cpu_s"] < 0.25
  assert line["host"]["cpu_model"] and line["host"]["cpus_usable"] >= 1
  if sys.platform.startswith("linux"):
    assert line["host"]["cpu_family"] and line["host"]["model"]
  assert line["session_wall_s"] >= waits["wall_s"]
  # one process: its line is also the session's (what pytest collected and failed)
  assert (line["collected"], line["failed"], line["exitstatus"]) == (3, 0, 0)
  report = _suite_profile.summarize([line], top=5)
  assert report.startswith(f"host: {line['host']['cpu_model']} (family ")
  assert "1 process(es)" in report and "test_case.py::test_starts_a_child" in report
  file_row = next(ln for ln in report.splitlines() if ln.endswith("  test_case.py"))
  assert float(file_row.split()[0]) >= child["children_cpu_s"]
  waiting = report.split("waiting (wall minus CPU")[1].split("\n\n")[0].splitlines()
  (row,) = [r for r in waiting if r.endswith("test_case.py::test_waits")]
  assert float(row.split()[0]) > 0.25


def test_report_of_a_missing_file_is_one_line(tmp_path, capsys):
  assert _suite_profile.main([str(tmp_path / "none.jsonl")]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith("suite_profile: cannot read")


TWO_FILES = {
  "test_a.py": "import time\ndef test_a1():\n  time.sleep(0.3)\ndef test_a2():\n  pass\n",
  "test_b.py": "def test_b1():\n  sum(i * i for i in range(2_000_000))\n"
  "def test_b2():\n  assert False\n",
}


def test_an_xdist_session_is_recorded_with_pytests_own_count_and_time(tmp_path, capsys):
  """Under xdist the controller (which runs no test) writes the session's line: what pytest
  collected and failed, its wall seconds; ``--record`` appends one line of it and the workers'
  tests, which ``experiments.benchmarks.suite_times`` makes a table row of."""
  from experiments.benchmarks import suite_times

  for name, text in TWO_FILES.items():
    (tmp_path / name).write_text(text)
  out = tmp_path / "profile.jsonl"
  env = dict(os.environ, PYTHONPATH=str(_procs.ROOT), **{_suite_profile.ENV: str(out)})
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
  cmd += ["--dist", "loadfile", "-p", "tests._suite_profile", "--rootdir", str(tmp_path)]
  r = _procs.run([*cmd, str(tmp_path)], timeout=_procs.scaled(120), cwd=tmp_path, env=env)
  assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]  # test_b2 fails
  lines = [json.loads(x) for x in out.read_text().splitlines()]
  (session,) = [ln for ln in lines if ln.get("controller")]
  assert len(lines) == 3 and "tests" not in session  # the controller ran none
  assert (session["collected"], session["failed"], session["exitstatus"]) == (4, 1, 1)
  slowest_worker = max(ln["session_wall_s"] for ln in lines if "tests" in ln)
  assert session["session_wall_s"] >= 0.3 and session["session_wall_s"] + 5 > slowest_worker
  record = tmp_path / "suite_times.jsonl"
  assert _suite_profile.main([str(out), "--top", "3", "--record", str(record)]) == 0
  assert "pytest: 4 tests, 1 failed" in capsys.readouterr().out
  (row,) = [json.loads(x) for x in record.read_text().splitlines()]
  assert row["pytest_wall_s"] == session["session_wall_s"] and row["processes"] == 2
  assert (row["collected"], row["failed"], row["host"]) == (4, 1, session["host"])
  assert [f for f, _ in row["costliest_files"]] == ["test_b.py", "test_a.py"]  # CPU, not wall
  assert row["waited_s"] >= 0.25
  table_row = suite_times._row(row)
  assert "| 4 (1 failed) |" in table_row and "| **not met** |" in table_row  # a test failed
  assert suite_times._row(dict(row, failed=0, pytest_wall_s=700.0)).count("| met |") == 1
  assert "| **not met** |" in suite_times._row(dict(row, failed=0, pytest_wall_s=721.0))


def test_recording_a_profile_without_a_session_line_is_one_line(tmp_path, capsys):
  old = tmp_path / "old.jsonl"  # a worker's line only, as before --record
  old.write_text(json.dumps({"worker": "gw0", "host": {}, "tests": {}, "long_compiles": []}) + "\n")
  assert _suite_profile.main([str(old), "--record", str(tmp_path / "r.jsonl")]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "no session line" in err[0] and not (tmp_path / "r.jsonl").exists()
  twice = tmp_path / "twice.jsonl"  # two sessions appended to one profile file
  one = {"worker": "", "host": {}, "collected": 1, "failed": 0, "exitstatus": 0, "commit": "c"}
  twice.write_text((json.dumps(dict(one, tests={}, session_wall_s=1.0)) + "\n") * 2)
  assert _suite_profile.main([str(twice), "--record", str(tmp_path / "r.jsonl")]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "2 sessions" in err[0] and not (tmp_path / "r.jsonl").exists()
