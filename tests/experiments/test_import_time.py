"""experiments/benchmarks/import_time.py: import CPU seconds of fresh interpreters, side by side."""

import sys

from experiments.benchmarks import import_time


def test_one_round_times_every_import_in_fresh_processes():
  got = import_time.measure([sys.executable], repeats=1)[sys.executable]
  assert got["versions"]["numpy"] and got["versions"]["ml_dtypes"] and got["versions"]["jax"]
  for case in ("numpy", "numpy_ml_dtypes", "jax"):
    (cpu,) = got[case]["cpu_s"]
    assert cpu > 0 and got[case]["cpu_s_median"] == cpu
  # JAX imports NumPy and ml_dtypes, so its import costs at least theirs (less rounding)
  assert got["jax"]["cpu_s_median"] > 0.5 * got["numpy_ml_dtypes"]["cpu_s_median"]
  assert got["ml_dtypes_cpu_s_median"] == round(
    got["numpy_ml_dtypes"]["cpu_s_median"] - got["numpy"]["cpu_s_median"], 3
  )


def test_bad_input_is_one_line_and_status_2(capsys, tmp_path):
  missing = tmp_path / "nope" / "python"
  assert import_time.main(["--python", str(missing), "--out", str(tmp_path / "o.jsonl")]) == 2
  assert capsys.readouterr().err.strip().splitlines() == [
    f"import_time: --python {missing}: no such interpreter"
  ]
  assert import_time.main(["--repeats", "0"]) == 2
  assert not (tmp_path / "o.jsonl").exists()


def test_the_committed_run_makes_the_block():
  block = import_time.results_table()
  assert "| 0.7.0 |" in block and "| 0.6.0 |" in block and "family 26" in block
