"""experiments/benchmarks/session_codegen.py: pytest under each arm's XLA flags, side by side."""

from experiments.benchmarks import session_codegen


def test_one_round_runs_each_arm_on_the_files():
  got = session_codegen.measure(["tests/test_xla_session.py"], rounds=1)
  assert list(got) == list(session_codegen.DEFAULT_ARMS)
  for arm, e in got.items():
    assert e["flags"] == session_codegen.ARMS[arm] and e["env"] == session_codegen.ARM_ENV[arm]
    assert e["cpu_s"][0] > 0 and e["wall_s"][0] > 0 and e["cpu_s_median"] == e["cpu_s"][0]
  assert got["fastest"]["cpu_over_first_same_round"] == [1.0]
  serial = got["fastest_serial"]
  assert serial["cpu_over_first_median"] == round(
    serial["cpu_s"][0] / got["fastest"]["cpu_s"][0], 3
  )


def test_bad_input_is_one_line_and_status_2(capsys, tmp_path):
  out = tmp_path / "o.jsonl"
  assert session_codegen.main(["--files", "tests/nope.py", "--out", str(out)]) == 2
  assert capsys.readouterr().err.strip().splitlines() == [
    "session_codegen: --files tests/nope.py: no such test file"
  ]
  assert session_codegen.main(["--rounds", "0", "--out", str(out)]) == 2
  assert session_codegen.main(["--arms", "fastest,nope", "--out", str(out)]) == 2
  assert (
    capsys.readouterr()
    .err.strip()
    .splitlines()[-1]
    .startswith("session_codegen: --arms nope: not one of fastest, fastest_serial,")
  )
  assert not out.exists()
