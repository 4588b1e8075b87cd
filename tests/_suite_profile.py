"""Where a test session's CPU time goes, per test: an opt-in pytest plugin.

  MINMAXLAB_SUITE_PROFILE=profile.jsonl python3 dev.py test -p tests._suite_profile
  python -m tests._suite_profile profile.jsonl [--top 30]

Each test process (the only one, or each xdist worker) appends one JSON line at the end of
the session: where it ran (the CPU's model name, family and model, the load), the session's
wall seconds, for every test its CPU seconds in this process (``time.process_time``), the CPU
seconds of the child processes it started and waited for (``RUSAGE_CHILDREN``), and JAX's
own compile, lowering and tracing seconds with the number of XLA compiles (JAX's monitoring
events), its wall seconds, and every compile of 0.5 s or more with its function's name. The
second command ranks the test files and the tests by CPU, lists the tests that waited most
(wall time in which neither the test's process nor its children used a CPU: on a 2-core host
with two workers a core idles then), and the longest compiles. Nothing is
recorded without the variable, and the plugin is not loaded unless named with ``-p``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
import time

import pytest

ENV = "MINMAXLAB_SUITE_PROFILE"
LONG_COMPILE_S = 0.5
_EVENTS = {  # JAX's monitoring event (its name's ending) -> our field
  "backend_compile_duration": "compile_s",
  "jaxpr_to_mlir_module_duration": "lower_s",
  "jaxpr_trace_duration": "trace_s",
}


class _Recorder:
  def __init__(self):
    self.started = time.perf_counter()
    self.current = "<outside tests>"
    self.tests: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    self.long_compiles: list[tuple[str, str, float]] = []

  def event(self, event: str, seconds: float, **kwargs) -> None:
    for ending, field in _EVENTS.items():
      if event.endswith(ending):
        self.tests[self.current][field] += seconds
        if field == "compile_s":
          self.tests[self.current]["compiles"] += 1
          if seconds >= LONG_COMPILE_S:
            name = str(kwargs.get("fun_name", "?"))
            self.long_compiles.append((self.current, name, round(seconds, 3)))
        return


_RECORDER: _Recorder | None = None


def _children_cpu() -> float:
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def pytest_configure(config):
  global _RECORDER
  if not os.environ.get(ENV) or _RECORDER is not None:
    return
  import jax.monitoring

  _RECORDER = _Recorder()
  jax.monitoring.register_event_duration_secs_listener(_RECORDER.event)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  if _RECORDER is None:
    yield
    return
  _RECORDER.current = item.nodeid
  cpu, children, wall = time.process_time(), _children_cpu(), time.perf_counter()
  yield
  record = _RECORDER.tests[item.nodeid]
  record["cpu_s"] += time.process_time() - cpu
  record["children_cpu_s"] += _children_cpu() - children
  record["wall_s"] += time.perf_counter() - wall
  _RECORDER.current = "<outside tests>"


def pytest_sessionfinish(session, exitstatus):
  config = session.config
  # this session's own role (a pytest a test started inherits its xdist worker's environment)
  worker = getattr(config, "workerinput", {}).get("workerid", "")
  controller = bool(getattr(config.option, "numprocesses", None)) and not worker
  if _RECORDER is None:
    return
  from experiments.benchmarks import _harness, speed_claims

  line = {
    "pid": os.getpid(),
    "worker": worker,
    # where it ran: a VM's model name can be as bare as "AMD EPYC" (family and model tell)
    "host": {**_harness.host(), **speed_claims.cpu_identity()},
    "session_wall_s": round(time.perf_counter() - _RECORDER.started, 1),
  }
  if controller or not line["worker"]:  # the session as pytest reports it (its own time)
    line.update(collected=session.testscollected, failed=session.testsfailed)
    line.update(exitstatus=int(exitstatus), commit=_harness.commit())
  if controller:  # the xdist controller runs no test: its line has the session's wall time
    line["controller"] = True
  else:
    line["process_cpu_s"] = round(time.process_time(), 2)
    line["tests"] = {k: {f: round(v, 3) for f, v in c.items()} for k, c in _RECORDER.tests.items()}
    line["long_compiles"] = _RECORDER.long_compiles
  with open(os.environ[ENV], "a") as f:  # one short line per process: appends do not interleave
    f.write(json.dumps(line) + "\n")


def _per_test(lines: list[dict]) -> dict[str, collections.Counter]:
  tests: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for line in lines:
    for name, fields in line.get("tests", {}).items():
      tests[name].update(fields)
  return tests


def _total(c) -> float:
  return c["cpu_s"] + c["children_cpu_s"]


def _waited(c) -> float:  # seconds of the test's wall time its process and children used no CPU
  return c["wall_s"] - _total(c)


def record(lines: list[dict]) -> dict:
  """One line for ``experiments/benchmarks/results/suite_times.jsonl`` (``--record``): where
  the session ran, pytest's own seconds (the controller's, else the one process's), the tests'
  CPU seconds and idle waits, and the costliest files."""
  sessions = [ln for ln in lines if "collected" in ln]
  if not sessions:
    raise ValueError("no session line (recorded by a version before --record, or cut short)")
  if len(sessions) > 1:
    raise ValueError(f"{len(sessions)} sessions appended to one file: record one at a time")
  session = sessions[0]
  workers = [ln for ln in lines if "tests" in ln]
  tests = _per_test(workers)
  files: dict[str, float] = collections.defaultdict(float)
  for name, c in tests.items():
    if "::" in name:
      files[name.split("::")[0]] += _total(c)
  return {
    "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    "commit": session["commit"],
    "host": session["host"],
    "pytest_wall_s": session["session_wall_s"],
    "collected": session["collected"],
    "failed": session["failed"],
    "exitstatus": session["exitstatus"],
    "processes": len(workers),
    "tests_cpu_s": round(sum(_total(c) for c in tests.values()), 1),
    "waited_s": round(sum(max(0.0, _waited(c)) for c in tests.values()), 1),
    "costliest_files": [
      [f, round(s, 1)] for f, s in sorted(files.items(), key=lambda x: -x[1])[:5]
    ],
  }


def summarize(lines: list[dict], top: int = 30) -> str:
  """The report of ``python -m tests._suite_profile``: processes, files, tests, compiles."""
  session = next((ln for ln in lines if "collected" in ln), None)
  lines = [ln for ln in lines if "tests" in ln]  # the processes that ran tests
  tests = _per_test(lines)
  files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for name, fields in tests.items():
    files[name.split("::")[0]].update(fields)

  def row(name, c):
    return (
      f"{_total(c):8.1f} {c['cpu_s']:8.1f} {c['children_cpu_s']:8.1f} {c['compile_s']:8.1f}"
      f" {int(c['compiles']):6d} {c['lower_s']:7.1f} {c['trace_s']:7.1f} {c['wall_s']:7.1f}  {name}"
    )

  head = "  cpu(s)  here(s) child(s) compile  count   lower   trace wall(s)  "
  host = lines[0].get("host", {}) if lines else {}
  out = [
    f"host: {host.get('cpu_model', '?')} (family {host.get('cpu_family', '?')},"
    f" model {host.get('model', '?')}), {host.get('cpus_usable', '?')} cpus, load"
    f" {host.get('load_average', '?')} at the end, JAX {host.get('jax', '?')}",
    f"{len(lines)} process(es): "
    + ", ".join(
      f"{ln['worker'] or ln['pid']} {ln['process_cpu_s']} CPU-s"
      f" in {ln.get('session_wall_s', '?')} s"
      for ln in lines
    ),
    f"all tests: {sum(_total(c) for c in tests.values()):.1f} CPU-s (here + their children)"
    + (
      f"; pytest: {session['collected']} tests, {session['failed']} failed,"
      f" {session['session_wall_s']} s"
      if session
      else ""
    ),
    "",
    head + "file",
  ]
  out += [row(n, c) for n, c in sorted(files.items(), key=lambda x: -_total(x[1]))[:top]]
  out += ["", head + "test"]
  out += [row(n, c) for n, c in sorted(tests.items(), key=lambda x: -_total(x[1]))[:top]]
  idle = sorted(tests.items(), key=lambda x: -_waited(x[1]))
  all_waits = sum(max(0.0, _waited(c)) for c in tests.values())
  out += ["", f"waiting (wall minus CPU; a core idles meanwhile): {all_waits:.1f} s in all"]
  out += [f"{_waited(c):8.1f}  {n}" for n, c in idle[:top] if _waited(c) > 0]
  compiles = sorted((c for ln in lines for c in ln["long_compiles"]), key=lambda c: -c[2])
  out += ["", f"compiles of {LONG_COMPILE_S} s or more: {len(compiles)}"]
  out += [f"{s:8.2f}  {fun}  {test}" for test, fun, s in compiles[:top]]
  return "\n".join(out)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description="Rank a test session's profile (" + ENV + ").")
  ap.add_argument("profile", help="the JSONL file the session wrote")
  ap.add_argument("--top", type=int, default=30, help="rows per table")
  ap.add_argument(
    "--record", metavar="JSONL", help="append the session's line to this file (the suite's times"
    " per host kind: experiments/benchmarks/results/suite_times.jsonl)",
  )  # fmt: skip
  args = ap.parse_args(argv)
  try:
    with open(args.profile) as f:
      lines = [json.loads(x) for x in f if x.strip()]
    line = record(lines) if args.record else None
  except (OSError, ValueError, KeyError) as e:
    print(f"suite_profile: cannot read {args.profile}: {e}", file=sys.stderr)
    return 2
  print(summarize(lines, args.top))
  if line:
    with open(args.record, "a") as f:
      f.write(json.dumps(line) + "\n")
    print(f"recorded in {args.record}: {json.dumps(line)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
