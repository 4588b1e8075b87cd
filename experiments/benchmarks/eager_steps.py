"""Eager game steps: what one ``game_step`` of each scheme costs run outside ``jit`` (a
notebook's loop, ``analysis.update_operator``'s default) beside the same step jitted, and how
many programs the eager steps lower once their shapes are compiled.

  python experiments/benchmarks/eager_steps.py [--checkouts DIR,DIR] [--steps 40]
      [--repeats 5] [--dim 8] [--out FILE]

Each checkout (default: this one) runs in a fresh process per round, its code first on
``sys.path``, the checkouts interleaved round by round (order rotated), so a revision before a
change and one after it are measured side by side on one host. In a process every scheme, on
an ``dim x dim`` random bilinear game, takes ``WARMUP`` eager steps (two Lookahead cycles:
each op compiled for its shapes), then ``--steps`` timed eager steps (process CPU and wall
seconds; JAX's lowering events counted), then as many steps of the jitted step (compiled
first). One JSON line (``--out`` appends it to a file) with the host and, per checkout, its
commit and per scheme every round's seconds and the medians: eager and jitted CPU seconds per
step, their ratio, programs lowered per eager step.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

if __name__ == "__main__" and __package__ in (None, ""):  # run as a script (not as a round)
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments import _report  # noqa: E402
from experiments.benchmarks import _harness  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "benchmarks" / "results"
README = "docs/benchmarks.md"
RESULT_FILES = ("2026-12-07_eager_steps_amd_epyc_zen5.jsonl",)
WARMUP = 10  # steps: two cycles of every Lookahead below (periods 5, and 2 and 4)
TIMEOUT_S = 600  # one round of one checkout; its process group is killed past it
SCHEMES = (
  "gda",
  "alternating",
  "extragradient",
  "optimistic",
  "lookahead_adam",
  "lookahead_extragradient_reset",
  "nested_lookahead_alternating",
)


def _transform(name: str):
  import optax

  import minmaxlab as mml

  adam = optax.adam(1e-2, b1=0.5)
  return {
    "gda": lambda: adam,
    "alternating": lambda: mml.alternating(adam),
    "extragradient": lambda: mml.extragradient(adam),
    "optimistic": lambda: mml.optimistic(adam),
    "lookahead_adam": lambda: mml.lookahead_minmax(adam, 5, 0.5),
    "lookahead_extragradient_reset": lambda: mml.lookahead_minmax(
      mml.extragradient(adam), 5, 0.5, reset_state=True
    ),
    "nested_lookahead_alternating": lambda: mml.nested_lookahead_minmax(
      mml.alternating(adam), (2, 4), (0.5, 0.5)
    ),
  }[name]()


@contextlib.contextmanager
def _lowerings() -> Iterator[list]:
  """The lowering events JAX records in the block (a list, filled as they come)."""
  import jax

  events = []

  def listen(event, seconds, **kwargs):
    if event.endswith("jaxpr_to_mlir_module_duration"):
      events.append(event)

  jax.monitoring.register_event_duration_secs_listener(listen)
  try:
    yield events
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)


def one_round(dim: int, steps: int) -> dict:
  """Every scheme's eager and jitted steps in this process: seconds and lowerings."""
  import jax
  import jax.numpy as jnp

  import minmaxlab as mml

  game = mml.games.random_bilinear(jax.random.key(0), dim)
  field = mml.vector_field(game.loss)
  start = mml.Players(jnp.linspace(-1.0, 1.0, dim), jnp.linspace(0.5, -0.7, dim))
  out = {"minmaxlab": str(Path(mml.__file__).parents[1])}  # the checkout measured
  for name in SCHEMES:
    tx = _transform(name)

    def step(p, s, tx=tx):
      return mml.game_step(tx, lambda q, i: field(q), p, s)[:2]

    p, s = start, tx.init(start)
    for _ in range(WARMUP):
      p, s = step(p, s)
    jax.block_until_ready(p)
    with _lowerings() as lowered:
      c0, w0 = time.process_time(), time.perf_counter()
      for _ in range(steps):
        p, s = step(p, s)
      jax.block_until_ready(p)
      eager_cpu, eager_wall = time.process_time() - c0, time.perf_counter() - w0
    programs = len(lowered)
    jitted = jax.jit(step)
    p, s = jax.block_until_ready(jitted(start, tx.init(start)))  # compiles
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
      p, s = jitted(p, s)
    jax.block_until_ready(p)
    out[name] = {
      "eager_cpu_s": eager_cpu,
      "eager_wall_s": eager_wall,
      "jit_cpu_s": time.process_time() - c0,
      "jit_wall_s": time.perf_counter() - w0,
      "programs_lowered": programs,
    }
  return out


def measure(checkouts: list[Path], steps: int, repeats: int, dim: int) -> dict:
  """``repeats`` rounds, each checkout in a fresh process per round (interleaved, rotated)."""
  rounds: dict[Path, list[dict]] = {c: [] for c in checkouts}
  for r in range(repeats):
    k = r % len(checkouts)
    for c in checkouts[k:] + checkouts[:k]:
      # the checkout's minmaxlab, this file's measurement (an older checkout lacks the file)
      code = (
        f"import sys, json, importlib.util; sys.path.insert(0, {str(c)!r});"
        f" spec = importlib.util.spec_from_file_location('eager_steps', {__file__!r});"
        " m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m);"
        f" print('RESULT ' + json.dumps(m.one_round({dim}, {steps})))"
      )
      rc, out, err = _harness.run_child([sys.executable, "-c", code], TIMEOUT_S, cwd=c)
      got = _harness.result_line(out)
      if rc != 0 or got is None:
        raise RuntimeError(f"eager_steps: the round in {c} failed: {err[-2000:]}")
      if got["minmaxlab"] != str(c):
        raise RuntimeError(f"eager_steps: the round for {c} imported {got['minmaxlab']}")
      rounds[c].append(got)
  result = {}
  for c in checkouts:
    schemes = {}
    for name in SCHEMES:
      runs = [x[name] for x in rounds[c]]
      eager = [x["eager_cpu_s"] / steps for x in runs]
      jit = [x["jit_cpu_s"] / steps for x in runs]
      schemes[name] = {
        "eager_cpu_s_per_step": [round(v, 6) for v in eager],
        "jit_cpu_s_per_step": [round(v, 6) for v in jit],
        "eager_wall_s_per_step": [round(x["eager_wall_s"] / steps, 6) for x in runs],
        "programs_lowered_per_step": [x["programs_lowered"] / steps for x in runs],
        "eager_cpu_s_per_step_median": round(statistics.median(eager), 6),
        "jit_cpu_s_per_step_median": round(statistics.median(jit), 6),
        "eager_over_jit_median": round(
          statistics.median(e / j for e, j in zip(eager, jit, strict=True)), 2
        ),
      }
    result[str(c)] = {"commit": _harness.commit(c), "schemes": schemes}
  return result


def _run_lines(name: str, r: dict) -> list[str]:
  m = r["machine"]
  runs = next(iter(r["checkouts"].values()))["schemes"]
  repeats = len(next(iter(runs.values()))["eager_cpu_s_per_step"])
  lines = [
    f"[JSON](../experiments/benchmarks/results/{name}): {m['cpu_model']}"
    f" (family {m.get('cpu_family')}, model {m.get('model')}), {m['cpus']} cores, JAX"
    f" {m.get('jax')}; {_harness.note_load(m['load_average'][0], m['cpus'])}; {r['steps']}"
    f" timed steps after {r['warmup']} on a {r['dim']}x{r['dim']} random bilinear game,"
    f" {repeats} rounds of fresh processes, the checkouts interleaved; medians over the rounds.",
    "",
    "| scheme | commit | eager CPU ms per step | jitted CPU ms per step | eager / jitted"
    " | programs lowered per eager step |",
    "|---|---|---|---|---|---|",
  ]
  for scheme in SCHEMES:
    for c in r["checkouts"].values():
      x = c["schemes"][scheme]
      lowered = statistics.median(x["programs_lowered_per_step"])
      lines.append(
        f"| {scheme} | {c['commit']} | {1e3 * x['eager_cpu_s_per_step_median']:.2f} |"
        f" {1e3 * x['jit_cpu_s_per_step_median']:.3f} | {x['eager_over_jit_median']:.0f} |"
        f" {lowered:g} |"
      )
  return lines


def results_table() -> str:
  """Every committed run: its host, then each scheme's eager and jitted step per checkout
  (docs/benchmarks.md's block)."""
  return _harness.runs_block(RESULTS, RESULT_FILES, _run_lines)


_report.register("eager_steps", README, "experiments.benchmarks.eager_steps:results_table")


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--checkouts", default=str(ROOT), help="checkouts, comma-separated")
  ap.add_argument("--steps", type=int, default=40)
  ap.add_argument("--repeats", type=int, default=5)
  ap.add_argument("--dim", type=int, default=8)
  ap.add_argument("--out", default=None)
  args = ap.parse_args(argv)
  for flag in ("steps", "repeats", "dim"):
    if getattr(args, flag) < 1:
      return _harness.user_error("eager_steps", f"--{flag} must be >= 1, got {getattr(args, flag)}")
  checkouts = [Path(c).resolve() for c in args.checkouts.split(",") if c]
  for c in checkouts:
    if not (c / "minmaxlab" / "__init__.py").is_file():
      return _harness.user_error("eager_steps", f"--checkouts {c}: not a minmaxlab checkout")
  from experiments.benchmarks.speed_claims import cpu_identity

  record = {"benchmark": "eager_steps", "machine": {**_harness.host(), **cpu_identity()}}
  record.update(steps=args.steps, warmup=WARMUP, dim=args.dim)
  record["checkouts"] = measure(checkouts, args.steps, args.repeats, args.dim)
  _harness.emit(record, args.out)
  return 0


if __name__ == "__main__":
  sys.exit(main())
