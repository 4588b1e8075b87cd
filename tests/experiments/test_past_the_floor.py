"""``past_the_floor.py``'s generated text: the matmul line divides Lipizzaner's CPU seconds by
the generation's matmul GFLOP at XLA's isolated rate, from the JSON alone."""

from experiments.benchmarks import past_the_floor as ptf


def _record(lip_cpu_s, bound):
  case = {
    "cpu_s": [13.0, 14.0], "wall_s": [7.0, 7.5], "first_call_s": 28.0, "where": "backend mesh",
    "cpu_s_median": 13.5, "wall_s_median": 7.25, "cpu_over_default_median": 1.0,
  }  # fmt: skip
  lip = None
  if lip_cpu_s is not None:
    case["lipizzaner_cpu_ratio"] = round(lip_cpu_s / case["cpu_s_median"], 2)
    lip = {"iterations": 4, "client_cpu_s_per_generation": lip_cpu_s, "median_s": 29.0}
    lip["seconds_per_iteration"] = [29.0] * 12
  machine = {"cpu_model": "AMD EPYC", "cpu_family": "25", "model": "17", "cpus": 2}
  machine["load_average"] = [0.2, 0.2, 0.2]
  r = {"machine": machine, "started": "s", "ended": "e", "work": "w", "cases": {"float32@2": case}}
  r.update(lipizzaner=lip, load_average_at_end=[1.0, 1.0, 1.0])
  if bound:
    r["matmul_bound"] = bound
  return r


BOUND = {
  "arm": "float32", "matmul_gflop_per_generation": 1110.9, "xla_matmul_gflops_train_mix": 100.0,
  "matmul_cpu_s": 11.109,
}  # fmt: skip


def test_the_matmul_line_gives_the_most_a_float32_case_can_reach():
  text = "\n".join(ptf._run_lines(_record(55.545, BOUND)))
  assert "not met by `float32@2`" in text  # 55.545 / 13.5 = 4.11x
  line = next(x for x in text.splitlines() if x.startswith("The matmuls alone"))
  assert "multiplies 1111 GFLOP" in line and "(100.0 GFLOP/s) that is 11.11 CPU s" in line
  assert "gets past 5.00x Lipizzaner's CPU seconds" in line  # 55.545 / 11.109


def test_no_matmul_line_without_lipizzaner_or_without_the_measurement():
  assert not any("matmuls alone" in x for x in ptf._run_lines(_record(None, BOUND)))
  assert not any("matmuls alone" in x for x in ptf._run_lines(_record(55.5, None)))


def test_no_bound_without_a_float32_arm():
  assert ptf._matmul_bound({}, ["bfloat16", "bfloat16_joined"]) is None
