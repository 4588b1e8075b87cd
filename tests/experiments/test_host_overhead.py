"""experiments/benchmarks/host_overhead.py (issue 49 item 5): the record of the loop-vs-scan
rounds (the host, the JAX version, the thread settings, each case's seconds, steps per second,
ratio and verdict), from two repeats of cases whose seconds are known; not the measured ratio,
which the shared host decides (the committed JSON has it)."""

import json
import statistics

from experiments.benchmarks import host_overhead as bench


class _Case:
  """A case whose loop and scan take known seconds (the loop's workdir is a fresh path)."""

  def __init__(self, name, steps, loop_s, scan_s):
    self.name, self.steps, self.loop_s, self.scan_s, self.calls = name, steps, loop_s, scan_s, []

  def loop(self, workdir):
    assert not workdir.exists() and workdir.parent.is_dir()  # a fresh run in a temporary folder
    self.calls.append("loop")
    wall = self.loop_s.pop(0)
    return (wall, 2 * wall), 1.5  # (wall, CPU) seconds of the window, the whole call

  def scan_seconds(self):
    self.calls.append("scan")
    wall = self.scan_s.pop(0)
    return wall, 2 * wall


def test_record_has_the_host_the_threads_and_each_case_ratio():
  gan = _Case("gan", 100, [9.0, 0.5, 0.4], [9.0, 0.38, 0.4])  # the first round: the warm-up
  coev = _Case("coevolution", 40, [9.0, 2.0, 1.0], [9.0, 1.0, 0.5])
  record = bench.run_cases([gan, coev], {"gan": "tiny"}, repeats=2, warmup=1)
  json.dumps(record)  # one JSON line
  machine = record["machine"]
  assert machine["cpu_model"] and "cpu_family" in machine and record["jax"] == machine["jax"]
  assert {"XLA_FLAGS", "OMP_NUM_THREADS", "affinity_cpus"} <= set(record["threads"])
  # Interleaved, the order rotated each round: (gan loop, gan scan, coev loop, coev scan), ...
  assert gan.calls == ["loop", "scan", "scan", "loop", "loop", "scan"]
  assert coev.calls == ["loop", "scan", "loop", "scan", "loop", "scan"]
  g, c = record["cases"]["gan"], record["cases"]["coevolution"]
  assert g["loop_s"] == [0.5, 0.4] and g["scan_s"] == [0.38, 0.4] and g["call_s"] == [1.5, 1.5]
  assert g["ratio_per_round"] == [0.76, 1.0] and g["ratio"] == 0.88 and not g["passed"]
  assert g["loop_cpu_s"] == [1.0, 0.8] and g["cpu_ratio_per_round"] == [0.76, 1.0]
  assert g["loop_steps_per_s"] == round(100 / statistics.median([0.5, 0.4]), 1)
  assert g["scan_steps_per_s"] == round(100 / statistics.median([0.38, 0.4]), 1)
  assert c["ratio_per_round"] == [0.5, 0.5] and c["steps_timed"] == 40 and c["target"] == 0.95
  assert record["passed"] is False and record["repeats"] == 2
  assert record["note"].startswith(("quiet host", "loaded host"))
  ok = bench.run_cases([_Case("gan", 10, [1.0, 1.0], [1.0, 0.96])], {}, repeats=1)
  assert ok["cases"]["gan"]["ratio"] == 0.96 and ok["passed"] is True


def test_a_bad_count_is_one_line_and_exit_2(capsys):
  assert bench.main(["--repeats", "0"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err == ["host_overhead: --repeats must be >= 1, got 0"]
