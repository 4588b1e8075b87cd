"""Compile seconds of the coevolution programs per config and compile mode (one JSON line).

For each config of ``experiments/coevolution/configs`` it builds the ``Coevolution`` that
``train.py`` builds and times, ahead of time, ``jax.jit(coev.step).lower(...)`` (tracing and
lowering to StableHLO) and ``.compile()`` (XLA) of the generation step, and the same for
``coev.init``, once per compile mode (``config.compile``: ``default`` is XLA's options,
``fast`` and ``fastest`` those of ``minmaxlab.distributed.compiler_options``), each in a
fresh process, as a user's run compiles. Then it compiles every mode in this process and
runs ``--generations`` generations of each mode's step, interleaved (mode A, mode B, mode A,
...), so a mode that compiles faster is also shown (not) to run slower: the JSON has each
mode's median seconds per generation and the median and quartiles of the per-generation
ratios to ``default``. Image configs use random data of the real shapes (no data set and no
trained classifier are loaded: compile time and generation time depend on shapes only). The
persistent compilation cache is off, so every number is a cold compile.

  python -m experiments.benchmarks.compile_time [--configs smoke,ring8_3x3,fashion_mnist_3x3]
      [--modes default,fast,fastest] [--generations 10] [--repeats 1]
      [--set fashion_mnist_3x3.d_every=1 smoke.hidden=16,16,16 ...] [--first_generation]
      [--stub_threefry] [--layouts]

``config_compile`` in each config's entry is the mode the config itself uses (the one the
targets apply to); ``step_total_s`` is that mode's trace-to-executable seconds.

``--stub_threefry`` also compiles every mode, in fresh processes, with JAX's threefry hash
lowered as two integer operations (:func:`stub_threefry`; a diagnostic, its random numbers are
wrong): the difference to the real compile is what random number generation costs.
``trace_s`` is the tracing part of ``lower_s`` (trace and lower to StableHLO).

Each step's entry has a ``census`` of its optimized HLO (:func:`hlo_census`): instructions,
fusions, copies, while loops, the functions the fusions come from, and the number of leaves of
the coevolution state. XLA CPU compiles one kernel per fusion, and most of a generation's
fusions are per leaf (selects, takes and writes of every parameter and optimizer leaf), so
compile seconds grow with the state's leaves: ``--set smoke.hidden=16,16,16`` adds a layer.
``--layouts`` compiles each config (in its own mode, fresh processes) with its networks as
trees of layers and as one vector each (``config.flat_params``, ``models.flat``: 23 state
leaves instead of 63 for the MLPs) and interleaves both steps' generations in this process
(``layouts`` in the config's entry; ratios to ``tree``).

``--against REV`` measures this checkout against git revision ``REV`` instead: for each
config, in its own mode, cold compiles in fresh processes that alternate between this code
and REV's (a temporary ``git worktree``, removed afterwards), ``--repeats`` times, each
followed by ``--generations`` generations in its process; medians and per-repeat ratios
``this / REV`` (``compile_time_against`` in the JSON; each run names the ``code_root`` it
imported). A change's compile-time claim is this A/B on one host, not two separate runs.

``--first_generation`` adds the main job's time from start to its first generation, cold
(empty persistent cache) and warm (a rerun with a new workdir, and a resumed run), as
``first_generation`` in the JSON (``experiments/benchmarks/first_generation.py``: three
runs of the main job in subprocesses; wall and CPU seconds).

Load matters: other jobs on the same cores slow a compile by their share; the JSON carries
the host (``_harness.host``), the load before and after each config and each compile's CPU s.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_compilation_cache", False)
CODE_ROOT = "MINMAXLAB_BENCHMARK_CODE_ROOT"  # where a child process imports the code from

import numpy as np  # noqa: E402

if __package__ in (None, ""):  # run as a script: python experiments/benchmarks/<this file>
  # (the library and configs of this checkout, or of the one ``--against`` measures)
  sys.path.insert(0, os.environ.get(CODE_ROOT, str(Path(__file__).resolve().parents[2])))


def _here(name: str):
  """A helper module of this file's folder, loaded from there: the code ``--against``
  imports (``CODE_ROOT``) may be a revision from before the helper existed."""
  spec = importlib.util.spec_from_file_location(f"_ct_{name}", Path(__file__).with_name(name))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


h = _here("_harness.py")
_census, _configs = _here("_compile_census.py"), _here("_compile_configs.py")
hlo_census, stub_threefry = _census.hlo_census, _census.stub_threefry
build, load_config, _parse = _configs.build, _configs.load_config, _configs._parse
from minmaxlab import coevolution as co  # noqa: E402
from minmaxlab import distributed, runner  # noqa: E402


def time_compile(coev, data, mode: str) -> tuple[dict, object, object]:
  """``(timings, compiled step, concrete initial state)`` of one cold compile in ``mode``."""
  key = jax.random.key(0)
  opts = distributed.compiler_options(mode)
  out = {"load_average_before": list(os.getloadavg()), "compiler_options": opts}
  state = None
  compiled = None
  for what, fn, args in (("init", coev.init, (key,)), ("step", coev.step, None)):
    if args is None:
      args = (key, state, data)
    c0, t0 = time.process_time(), time.perf_counter()
    traced = jax.jit(fn, compiler_options=opts).trace(*args)
    tt = time.perf_counter()
    lowered = traced.lower()
    t1 = time.perf_counter()
    compiled = lowered.compile()
    c2, t2 = time.process_time(), time.perf_counter()
    out[what] = {
      "trace_s": round(tt - t0, 2),
      "lower_s": round(t1 - t0, 2),
      "compile_s": round(t2 - t1, 2),
      "total_s": round(t2 - t0, 2),
      "cpu_s": round(c2 - c0, 2),
      "stablehlo_kib": round(len(lowered.as_text()) / 1024, 1),
      "hlo_kib": round(len(compiled.as_text()) / 1024, 1),
    }
    if what == "step":  # what the step is made of, and the state leaves it scales with
      census = hlo_census(compiled.as_text())
      out[what]["census"] = {"state_leaves": len(jax.tree.leaves(state)), **census}
    if what == "init":
      state = compiled(key)
  out["load_average_after"] = list(os.getloadavg())
  return out, compiled, state


def interleaved_generations(programs: dict, data, generations: int, base="default") -> dict:
  """Seconds per generation of each mode's compiled step, the modes interleaved by
  ``_harness.interleave`` (one untimed warm-up round), with each one's ratios to ``base``'s."""
  states = {m: state for m, (_, state) in programs.items()}

  def generation(mode, g):
    states[mode], _ = programs[mode][0](
      jax.random.fold_in(jax.random.key(2), g), states[mode], data
    )
    return states[mode]

  cases = {m: (lambda g, m=m: generation(m, g)) for m in programs}
  reps = h.interleave(cases, generations, warmup=1)
  secs = {m: [r.wall_s for r in rs] for m, rs in reps.items()}
  out = {}
  ref = np.asarray(secs[base]) if base in secs else None
  for mode, s in secs.items():
    s = np.asarray(s)
    e = {"seconds": [round(float(x), 4) for x in s], "median_s": round(float(np.median(s)), 4)}
    e["cpu_s"] = [round(r.cpu_s, 4) for r in reps[mode]]
    if ref is not None and mode != base:
      r = s / ref
      e[f"ratio_to_{base}_median"] = round(float(np.median(r)), 3)
      e[f"ratio_to_{base}_quartiles"] = [round(float(x), 3) for x in np.percentile(r, [25, 75])]
    out[mode] = e
  return out


def _fresh_process_compile(
  name: str,
  sets: list,
  mode: str,
  stub: bool = False,
  root: Path | None = None,
  generations: int = 0,
) -> dict:
  """:func:`time_compile` of one config and mode in a fresh Python process (``stub``: with
  :func:`stub_threefry`; ``root``: the code of another checkout; ``generations``: then also
  that many generations of the compiled step, after one warm-up, in the same process)."""
  one = f"{name}:{mode}" + (":stub_threefry" if stub else "")
  root = Path(__file__).resolve().parents[2] if root is None else Path(root)
  # This file runs (the same measurement), importing the library and configs from ``root``.
  cmd = [sys.executable, str(Path(__file__).resolve()), "--one", one]
  if sets:
    cmd += ["--set", *sets]
  if generations:
    cmd += ["--generations", str(generations)]
  env = dict(os.environ, PYTHONPATH=str(root), **{CODE_ROOT: str(root)})
  code, out, err = h.run_child(cmd, 3600, env, cwd=root)
  if code != 0:
    raise RuntimeError(f"{name}:{mode} failed: {err.strip().splitlines()[-1:]}")
  return json.loads(out.strip().splitlines()[-1])


def time_config(
  name: str,
  overrides: dict,
  sets: list,
  modes,
  generations: int,
  stub: bool = False,
  keep: dict | None = None,
) -> dict:
  """Each mode's cold compile in a fresh process and, with ``generations``, each mode's
  program compiled here and its generations interleaved; ``keep`` (a dict) receives those
  programs, ``{mode: (step, state)}``."""
  config, coev, data = build(name, overrides)
  out = {
    "cell_strategy": coev.cell_strategy,
    "schedule": coev.config.schedule,
    "d_every": coev.config.d_every,
    "config_compile": config.get("compile", "default"),
    "modes": {mode: _fresh_process_compile(name, sets, mode) for mode in modes},
  }
  if stub:
    out["threefry_stub"] = {m: _fresh_process_compile(name, sets, m, stub=True) for m in modes}
  if generations:
    programs = {}
    for mode in modes:
      _, step, state = time_compile(coev, data, mode)
      programs[mode] = (step, state)
    out["generations"] = interleaved_generations(programs, data, generations)
    if keep is not None:
      keep.update(programs)
  return out


def time_layouts(
  name: str, overrides: dict, sets: list, mode: str, generations: int, reuse=None
) -> dict:
  """The config with each network as a tree of layers and as one vector
  (``config.flat_params``): a cold compile of each in a fresh process and, with
  ``generations``, both compiled steps' generations interleaved in this one. ``reuse``:
  ``(flat_params, (step, state))``, the config's own layout already compiled in this process
  in ``mode`` (by :func:`time_config`), whose generations then run that program (the same
  executable a second compile would give) instead of compiling it again."""
  out, programs, data = {"mode": mode}, {}, None
  for flat in (False, True):
    layout = "flat" if flat else "tree"
    out[layout] = _fresh_process_compile(name, [*sets, f"{name}.flat_params={flat}"], mode)
    if generations:
      _, coev, data = build(name, dict(overrides, flat_params=str(flat)))
      if reuse is not None and reuse[0] == flat:
        programs[layout] = reuse[1]
      else:
        _, step, state = time_compile(coev, data, mode)
        programs[layout] = (step, state)
  if generations:
    out["generations"] = interleaved_generations(programs, data, generations, base="tree")
  return out


def _machine() -> dict:
  """The harness's host description, and whether the CPU has AVX-512."""
  return h.host() | {"avx512": runner.cpu_has_avx512()}


def time_against(name: str, sets: list, rev: str, repeats: int, generations: int) -> dict:
  """This checkout against git revision ``rev`` (a temporary ``git worktree``): cold compiles
  of the config in its own mode, each in a fresh process, alternating (this, rev, this, ...)
  ``repeats`` times, each followed by ``generations`` generations in its process. Medians
  and per-repeat ratios ``this / rev``."""
  here = Path(__file__).resolve().parents[2]
  mode = load_config(name, _overrides(sets, name)).get("compile", "default")
  sha = subprocess.run(
    ["git", "rev-parse", rev], cwd=here, capture_output=True, text=True, check=True
  ).stdout.strip()
  runs = {"this": [], rev: []}
  with tempfile.TemporaryDirectory() as tmp:
    other = Path(tmp) / "rev"
    subprocess.run(
      ["git", "worktree", "add", "--detach", str(other), sha],
      cwd=here,
      capture_output=True,
      check=True,
    )
    try:
      for _ in range(repeats):
        for side, root in (("this", here), (rev, other)):
          runs[side].append(
            _fresh_process_compile(name, sets, mode, root=root, generations=generations)
          )
    finally:
      subprocess.run(
        ["git", "worktree", "remove", "--force", str(other)],
        cwd=here,
        capture_output=True,
        check=False,
      )

  def paired(get) -> dict:
    """Both sides' values of ``get(run)``, their medians and the median per-repeat ratio."""
    a = np.asarray([get(r) for r in runs["this"]])
    b = np.asarray([get(r) for r in runs[rev]])
    return {
      "this": a.tolist(),
      rev: b.tolist(),
      "this_median": float(np.median(a)),
      f"{rev}_median": float(np.median(b)),
      "ratio_median": round(float(np.median(a / b)), 3),
    }

  out = {
    "mode": mode,
    "rev": rev,
    "sha": sha,
    "step_total_s": paired(lambda r: r["step"]["total_s"]),
    "step_cpu_s": paired(lambda r: r["step"]["cpu_s"]),
    "census": {side: runs[side][0]["step"]["census"] for side in runs},
    "runs": runs,
  }
  if generations:
    out["generation_median_s"] = paired(lambda r: r["generations"]["median_s"])
  return out


def _overrides(sets: list, name: str) -> dict:
  """``{field: value}`` of the ``--set name.field=value`` items for config ``name``."""
  out = {}
  for item in sets:
    target, _, value = item.partition("=")
    cfg, _, field = target.partition(".")
    if cfg == name:
      out[field] = value
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--configs", default="smoke,ring8_3x3,fashion_mnist_3x3")
  ap.add_argument("--modes", default="default,fast,fastest", help="compile modes (config.compile)")
  ap.add_argument(
    "--generations", type=int, default=10, help="interleaved generations per mode (0: none)"
  )
  ap.add_argument("--repeats", type=int, default=1, help="cold compiles per config and mode")
  ap.add_argument("--set", nargs="*", default=[], help="config.field=value overrides")
  ap.add_argument("--one", default="", help=argparse.SUPPRESS)  # "config:mode", in a child
  ap.add_argument(
    "--against",
    default="",
    metavar="REV",
    help="instead: this checkout against git revision REV, each config in its own mode,"
    " fresh processes alternating --repeats times (each then times --generations)",
  )
  ap.add_argument(
    "--first_generation",
    action="store_true",
    help="also time the main job to its first generation, cold and warm (minutes)",
  )
  ap.add_argument(
    "--stub_threefry",
    action="store_true",
    help="also compile each mode with threefry lowered as two integer ops (diagnostic:"
    " the seconds random number generation costs)",
  )
  ap.add_argument(
    "--layouts",
    action="store_true",
    help="also compile and time each config (in its own compile mode) with its networks as"
    " trees of layers and as flat vectors (config.flat_params), generations interleaved",
  )
  args = ap.parse_args()
  if args.one:
    return _one(args)
  if args.against:
    return _against(args)
  result = {"benchmark": "compile_time", "machine": _machine(), "configs": {}}
  for name in args.configs.split(","):
    result["configs"][name] = _config_entry(name, args, args.modes.split(","))
  if args.first_generation:
    from experiments.benchmarks import first_generation

    result["first_generation"] = first_generation.measure(
      "experiments/coevolution/configs/ring8_3x3.py"
    )
    result["first_generation"]["load_average_after"] = list(os.getloadavg())
  h.emit(result)


def _one(args) -> None:
  """One cold compile in this fresh process: its timings as a JSON line."""
  name, mode, *stub = args.one.split(":")
  if stub:
    stub_threefry()
  _, coev, data = build(name, _overrides(args.set, name))
  timings, step, state = time_compile(coev, data, mode)
  if args.generations:
    timings["generations"] = interleaved_generations({mode: (step, state)}, data, args.generations)[
      mode
    ]
  timings["code_root"] = str(Path(co.__file__).resolve().parents[2])  # minmaxlab/coevolution/
  h.emit(timings)


def _against(args) -> None:
  # A SIGTERM (timeout, kill) exits through the ``finally`` that removes the worktree.
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
  result = {"benchmark": "compile_time_against", "machine": _machine(), "configs": {}}
  for name in args.configs.split(","):
    result["configs"][name] = time_against(
      name, args.set, args.against, args.repeats, args.generations
    )
    print(f"# {name}: {json.dumps(result['configs'][name])}", flush=True)
  h.emit(result)


def _config_entry(name: str, args, modes: list) -> dict:
  """A config's ``--repeats`` runs of every mode, each mode's step seconds, and the layouts."""
  overrides = _overrides(args.set, name)
  runs, kept = [], {}
  for _ in range(args.repeats):
    runs.append(
      time_config(name, overrides, args.set, modes, args.generations, args.stub_threefry, kept)
    )
    print(f"# {name}: {json.dumps(runs[-1])}", flush=True)
  own = runs[0]["config_compile"]
  entry = {"config_compile": own}
  for mode in modes:
    entry[f"{mode}_step_total_s"] = [r["modes"][mode]["step"]["total_s"] for r in runs]
    entry[f"{mode}_step_cpu_s"] = [r["modes"][mode]["step"]["cpu_s"] for r in runs]
    if args.stub_threefry:
      stubbed = [r["threefry_stub"][mode]["step"]["total_s"] for r in runs]
      entry[f"{mode}_step_total_s_threefry_stub"] = stubbed
  if own in modes:
    entry["step_total_s"] = entry[f"{own}_step_total_s"]
  entry["runs"] = runs
  if args.layouts:
    flat = bool(load_config(name, overrides).get("flat_params", False))
    reuse = (flat, kept[own]) if own in kept else None  # the own layout, compiled above
    entry["layouts"] = time_layouts(name, overrides, args.set, own, args.generations, reuse)
    print(f"# {name} layouts: {json.dumps(entry['layouts'])}", flush=True)
  return entry


if __name__ == "__main__":
  main()
