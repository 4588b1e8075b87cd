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
