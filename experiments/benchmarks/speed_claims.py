"""The speed claims of docs/benchmarks.md, measured in one run on this host (one JSON line).

Every speed target the documentation states is measured here, one benchmark after another, each in
a fresh process (its own process group, killed whole on a signal or a failure), with the
documentation's arguments, so that all the figures of one summary come from one host on one
occasion and no ratio divides by a number measured elsewhere:

1. ``compile_time.py``: cold compiles of the generation step of ``smoke`` and ``ring8_3x3`` in
   each compile mode (``default``, ``fast``, ``fastest``), ``--repeats`` 5 times, each in a
   fresh process, then the modes' generations interleaved; targets: each config in its own
   mode (``config.compile``) compiles in under 5 s and 20 s (median).
2. ``coevolution_throughput.py --floor --strategies map``: the library's 2x2 Lipizzaner
   generation (600 batches per cell, ``d_every=2``) against the plain-JAX floor program doing
   the same work, repeats interleaved; targets: equal matmul FLOPs (from both compiled
   programs), median of the same repeat's time ratios at or below 1.0, training at or above
   85% of XLA's per-shape matmul throughput measured in the same run.
3. ``transform_overhead.py --problems mlp_gan``: Lookahead-minmax over each inner scheme
   (GDA, alternating, extragradient, optimistic), rounds rotated; target: the median of the
   same round's time ratios under +3% for every scheme.
4. ``first_generation.py``: the main job's time from its start to its first generation line,
   cold (empty compilation cache) and warm (a new workdir, a resumed run); no target.
5. with ``--lipizzaner CHECKOUT`` (and ``--lipizzaner_python``, an interpreter with its
   requirements): ``lipizzaner_side_by_side.py``, Lipizzaner itself on the same 2x2 MNIST
   grid, divided by the library's generation of the floor benchmark above (``--floor_json``:
   the same run's); no target.

Each benchmark's own JSON line is written to ``--out`` as
``<date>_speed_claims_<cpu>_<benchmark>.json``, and the summary as
``<date>_speed_claims_<cpu>.json``: the host (with the CPU's family and model, which a VM's
bare model name hides), the start and end times, the load average before and after each
benchmark, one row per target (the value, the target, whether it is met, the file) and the
figures without a target (``figures``: compile modes, first generation, Lipizzaner). The
summary is also printed. Exit status 0 whether or not the targets are met (a benchmark is a
measurement, not a test); 1 if a benchmark failed, 2 for bad arguments (one line, nothing run).

  python experiments/benchmarks/speed_claims.py [--out runs/speed_claims] [--quick]
      [--only compile,floor,overhead,first_generation] [--tag run2]
      [--lipizzaner ~/lipizzaner-gan --lipizzaner_python ~/lipizzaner-venv/bin/python]

``--quick`` runs each benchmark at a tiny size (a smoke test of the protocol: its figures are
no claim). A full run took 21-24 minutes on a 2-core host; run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# Each benchmark: its script and the README's arguments (full) or a tiny run (quick).
COMPILE_CONFIGS = {"smoke": 5.0, "ring8_3x3": 20.0}  # config -> compile-seconds target
FLOOR_RATIO, MATMUL_SHARE, LOOKAHEAD_OVERHEAD = 1.0, 0.85, 0.03
PROTOCOL = {
  "compile": {
    "full": ["--configs", ",".join(COMPILE_CONFIGS), "--modes", "default,fast,fastest"]
    + ["--repeats", "5", "--generations", "5"],
    "quick": ["--configs", "smoke", "--modes", "fastest", "--repeats", "1", "--generations", "1"],
  },
  "floor": {
    "full": ["--floor", "--strategies", "map", "--generations", "9"],
    "quick": ["--floor", "--strategies", "map", "--generations", "1", "--floor-steps", "6"]
    + ["--matmul-repeats", "1", "--fitness-samples", "100"],
  },
  "overhead": {
    "full": ["--problems", "mlp_gan", "--steps", "100,2000", "--repeats", "25"],
    "quick": ["--problems", "mlp_gan", "--quick", "--repeats", "1", "--schemes", "gda"],
  },
  "first_generation": {
    "full": ["--config", "experiments/coevolution/configs/ring8_3x3.py"],
    "quick": ["--config", "experiments/coevolution/configs/smoke.py"],
  },
  # only with --lipizzaner (the project ships no Lipizzaner code); the floor JSON of the same
  # run is passed on (--floor_json) when the floor ran, else the script runs its own
  "lipizzaner": {"full": ["--iterations", "4"], "quick": ["--iterations", "2"]},
}
BENCHMARKS = tuple(PROTOCOL)
DEFAULT = BENCHMARKS[:-1]  # Lipizzaner only with --lipizzaner
STEMS = {
  "compile": "compile_time",
  "floor": "coevolution_throughput_floor",
  "overhead": "transform_overhead",
  "first_generation": "first_generation",
  "lipizzaner": "lipizzaner_side_by_side",
}
SCRIPTS = {
  "compile": "compile_time.py",
  "floor": "coevolution_throughput.py",
  "overhead": "transform_overhead.py",
  "first_generation": "first_generation.py",
  "lipizzaner": "lipizzaner_side_by_side.py",
}


def cpu_slug(model: str) -> str:
  """``'AMD EPYC 7B13'`` -> ``'amd_epyc_7b13'``; ``'Intel(R) Xeon(R) Processor'`` ->
  ``'intel_xeon_processor'`` (a file-name part naming the host's CPU)."""
  words = re.sub(r"\((r|tm)\)", "", model.lower())
  return "_".join(re.findall(r"[a-z0-9]+", words)) or "cpu"


def _child(cmd: list[str], timeout: float | None) -> str:
  """Run ``cmd`` in its own process group and return its stdout; the whole group is
  killed on a timeout, a signal or any exception here (nothing is left running)."""
  proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
  try:
    out, _ = proc.communicate(timeout=timeout)
  except BaseException:
    try:
      os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass
    proc.wait()
    raise
  if proc.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd[1:3])} exited with {proc.returncode}")
  return out


def last_json(text: str) -> dict:
  """The last line of ``text`` that parses as a JSON object (a benchmark's result line)."""
  for line in reversed(text.strip().splitlines()):
    if line.startswith("{"):
      return json.loads(line)
  raise ValueError("no JSON line in the benchmark's output")


def _run(benchmark: str, size: str, timeout: float | None, extra: list[str]) -> dict:
  cmd = [sys.executable, str(HERE / SCRIPTS[benchmark]), *PROTOCOL[benchmark][size], *extra]
  return last_json(_child(cmd, timeout))


def _row(claim: str, value, target: str, met: bool, source: str, **extra) -> dict:
  return {
    "claim": claim,
    "value": value,
    "target": target,
    "met": bool(met),
    "source": source,
    **extra,
  }


def targets(results: dict[str, dict], files: dict[str, str]) -> list[dict]:
  """One row per README target from the benchmarks' JSON (``results`` by benchmark name:
  ``compile``, ``floor``, ``overhead``; ``files`` names where each was written)."""
  rows = []
  if "compile" in results:
    for name, entry in results["compile"]["configs"].items():
      seconds = entry["step_total_s"]
      limit = COMPILE_CONFIGS[name]
      median = statistics.median(seconds)
      rows.append(
        _row(
          f"{name} compiles (own mode {entry['config_compile']}), median of {len(seconds)} cold"
          " compiles",
          round(median, 2),
          f"< {limit:g} s",
          median < limit,
          files["compile"],
          per_repeat=seconds,
        )
      )
  if "floor" in results:
    # the full-length library program: the one compared with the floor
    lib = next(p for p in results["floor"]["programs"].values() if "ratio_to_floor_median" in p)
    equal = abs(lib["matmul_flops_over_floor"] - 1.0) <= 1e-3
    rows.append(
      _row(
        "library / equal-work floor matmul FLOPs per generation",
        lib["matmul_flops_over_floor"],
        "1.0 (equal work)",
        equal,
        files["floor"],
      )
    )
    rows.append(
      _row(
        f"library / equal-work floor time, median of {len(lib['ratio_to_floor_same_rep'])}"
        " interleaved repeats",
        lib["ratio_to_floor_median"],
        f"<= {FLOOR_RATIO:g}",
        equal and lib["ratio_to_floor_median"] <= FLOOR_RATIO,
        files["floor"],
        per_repeat=lib["ratio_to_floor_same_rep"],
      )
    )
    share = lib["train_fraction_of_xla_matmul_mix"]
    rows.append(
      _row(
        "training's share of XLA's per-shape matmul throughput (same run)",
        share,
        f">= {MATMUL_SHARE:g}",
        share >= MATMUL_SHARE,
        files["floor"],
      )
    )
  if "overhead" in results:
    r = results["overhead"]
    for scheme, x in r["results"]["mlp_gan"].items():
      paired = x["overhead_paired"]
      layout = f", layout {x['layout']}" if "layout" in x else ""  # runs before one layout
      rows.append(
        _row(
          f"Lookahead-minmax overhead over {scheme} (MLP GAN{layout}), median of"
          f" {r['repeats']} rounds' ratios",
          paired["median"],
          f"< {LOOKAHEAD_OVERHEAD:+.0%}",
          paired["median"] < LOOKAHEAD_OVERHEAD,
          files["overhead"],
          quartiles=[paired["q1"], paired["q3"]],
          # the same rounds read two other ways: the ratio of the medians, and CPU time
          ratio_of_medians=x["overhead"],
          cpu_paired_median=x["overhead_cpu_paired"]["median"],
        )
      )
  return rows


def cpu_identity(cpuinfo: str | None = None) -> dict:
  """The first CPU's family, model, stepping and clock from ``/proc/cpuinfo``: a VM's model
  name can be as bare as ``AMD EPYC``, and family 25 covers Zen 3 (model 1) and Zen 4
  (model 17), whose speeds differ."""
  if cpuinfo is None:
    try:
      cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
      return {}
  out = {}
  for line in cpuinfo.split("\n\n")[0].splitlines():
    key, _, value = (part.strip() for part in line.partition(":"))
    if key in ("cpu family", "model", "stepping", "cpu MHz"):
      out[key.replace(" ", "_")] = value
  return out


def figures(results: dict[str, dict]) -> dict:
  """The other figures the README quotes from the same run (no target of their own): each
  compile mode's median cold compile and generation time per config, with ratios to XLA's
  defaults; the main job's time to its first generation, cold and warm."""
  out = {}
  if "compile" in results:
    modes = {}
    for name, entry in results["compile"]["configs"].items():
      per = {}
      for mode in [k[: -len("_step_total_s")] for k in entry if k.endswith("_step_total_s")]:
        gens = [r["generations"][mode]["median_s"] for r in entry["runs"] if "generations" in r]
        ratios = [
          r["generations"][mode]["ratio_to_default_median"]
          for r in entry["runs"]
          if "ratio_to_default_median" in r.get("generations", {}).get(mode, {})
        ]
        per[mode] = {
          "compile_s_median": round(statistics.median(entry[f"{mode}_step_total_s"]), 2),
          "compile_cpu_s_median": round(statistics.median(entry[f"{mode}_step_cpu_s"]), 2),
          "generation_s_median": round(statistics.median(gens), 4) if gens else None,
          "generation_ratio_to_default_median": (
            round(statistics.median(ratios), 3) if ratios else None  # None for default itself
          ),
        }
      if "default" in per:
        for m in per.values():
          m["compile_ratio_to_default"] = round(
            m["compile_s_median"] / per["default"]["compile_s_median"], 3
          )
      modes[name] = {"own": entry["config_compile"], "modes": per}
    out["compile_modes"] = modes
  if "first_generation" in results:
    r = results["first_generation"]
    out["first_generation"] = {
      "config": r["config"],
      **{
        k: {
          "to_first_generation_s": r[k]["to_first_generation_s"],
          "to_first_generation_cpu_s": r[k]["to_first_generation_cpu_s"],
        }
        for k in ("cold", "warm_new", "warm_resume")
      },
    }
  if "lipizzaner" in results:
    r = results["lipizzaner"]
    out["lipizzaner"] = {
      "lipizzaner_s_per_iteration": r["lipizzaner"]["median_s"],
      "lipizzaner_client_cpu_s": r["lipizzaner"]["client_cpu_s_per_generation"],
      "minmaxlab_s_per_generation": r["minmaxlab"]["median_s"],
      "minmaxlab_cpu_s": r["minmaxlab"]["cpu_s_median"],
      **{k: r[k] for k in ("wall_ratio", "cpu_ratio", "wall_ratio_without_fid")},
    }
  return out


def _machine() -> dict:
  sys.path.insert(0, str(ROOT))
  from experiments.benchmarks import _harness as h
  from minmaxlab import runner

  return {
    **h.host(),
    "cpu_model": runner.cpu_model(),
    **cpu_identity(),
    "avx512": runner.cpu_has_avx512(),
    "cpus": os.cpu_count(),
    "python": platform.python_version(),
    "host": platform.node(),
  }


def _now() -> str:
  return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", default=str(ROOT / "runs" / "speed_claims"), help="result folder")
  ap.add_argument("--quick", action="store_true", help="tiny sizes: a protocol smoke test")
  ap.add_argument("--only", default=",".join(DEFAULT), help=f"a subset of {','.join(BENCHMARKS)}")
  ap.add_argument("--tag", default="", help="appended to the file names (a second run that day)")
  ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per benchmark")
  ap.add_argument(
    "--lipizzaner", default=None, help="your Lipizzaner checkout: also run Lipizzaner itself"
  )
  ap.add_argument("--lipizzaner_python", default="python3", help="its interpreter (torch etc.)")
  args = ap.parse_args(argv)
  chosen = [b for b in args.only.split(",") if b]
  if args.lipizzaner and "lipizzaner" not in chosen:
    chosen.append("lipizzaner")
  unknown = sorted(set(chosen) - set(BENCHMARKS))
  if unknown:
    print(
      f"speed_claims: unknown benchmark {unknown[0]!r} (one of {', '.join(BENCHMARKS)})",
      file=sys.stderr,
    )
    return 2
  if "lipizzaner" in chosen and not args.lipizzaner:
    print("speed_claims: the lipizzaner benchmark needs --lipizzaner CHECKOUT", file=sys.stderr)
    return 2
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
  size = "quick" if args.quick else "full"
  machine = _machine()
  out = Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
  slug = cpu_slug(machine["cpu_model"]) + ("_quick" if args.quick else "")
  slug += f"_{cpu_slug(args.tag)}" if args.tag else ""
  summary = {
    "benchmark": "speed_claims",
    "size": size,
    "machine": machine,
    "started": _now(),
    "runs": {},
  }
  results, files, rc = {}, {}, 0
  for name in chosen:
    t0, load = time.time(), list(os.getloadavg())
    print(f"# speed_claims: {name} ...", file=sys.stderr, flush=True)
    extra = []
    if name == "lipizzaner":
      extra = ["--lipizzaner", args.lipizzaner, "--python", args.lipizzaner_python]
      if "floor" in files:  # the same run's floor, not a second one
        extra += ["--floor_json", str(out / files["floor"])]
    try:
      results[name] = _run(name, size, args.timeout, extra)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
      print(f"speed_claims: {name} failed: {e}", file=sys.stderr)
      rc = 1
      continue
    path = out / f"{stamp}_speed_claims_{slug}_{STEMS[name]}.json"
    path.write_text(json.dumps(results[name]) + "\n")
    files[name] = path.name
    summary["runs"][name] = {
      "file": path.name,
      "seconds": round(time.time() - t0, 1),
      "load_average_before": load,
      "load_average_after": list(os.getloadavg()),
      "argv": PROTOCOL[name][size] + extra,
    }
  summary["ended"] = _now()
  summary["targets"] = targets(results, files)
  summary["figures"] = figures(results)
  summary["all_met"] = bool(summary["targets"]) and all(t["met"] for t in summary["targets"])
  from experiments.benchmarks import _harness as h

  path = out / f"{stamp}_speed_claims_{slug}.json"
  path.unlink(missing_ok=True)  # one line per file
  h.emit(summary, path)
  return rc


if __name__ == "__main__":
  sys.exit(main())
