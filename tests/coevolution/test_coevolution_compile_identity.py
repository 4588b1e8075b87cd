"""Issue 11 item 5: the generation program's results stay bit-identical while its compile
time is cut. ``data/step_fingerprints.json`` holds the sha256 of every state leaf after two
generations, for ``smoke`` (one individual per cell, simultaneous schedule, Lookahead) and a
two-population variant (Lipizzaner's schedule, ``d_every=2``, neighbourhood opponents), one
recording per platform. Recorded on AMD EPYC without AVX-512 once a cell's steps became
``minmaxlab.game_step`` (issue 48 item 3): a Lookahead sync now sets the params to the slow
weights exactly (before: ``params + (slow - params)``, one rounding off), which changed 2
leaves of ``smoke`` and 7 of the two-population case (each sum by at most 2e-8 relative);
the same code applying the updates with ``optax.apply_updates`` had matched every leaf of the
previous recording bit for bit. The recordings of AMD EPYC and Intel Xeon with AVX-512 (of the
code before) were dropped then: they can be made only on those hosts. AMD EPYC with AVX-512 was
recorded again on a Zen 5 (family 26) after a check: the current code with
``optax.apply_updates`` in place of the exact sync matched every leaf of the dropped recording
(both cases), and the exact sync changed 1 leaf of ``smoke`` and 7 of the two-population case.
Hashes are exact only on the same JAX build and CPU kind, so on another platform the test
skips (naming the recorded ones). The recordings store each network as a tree of layers
(``flat_params=False``); ``test_flat_parameters_give_the_structured_results`` checks the
flat layout against it on any host.

Record this platform (only for an intended change of results, or a new platform):
``python -m tests.coevolution.test_coevolution_compile_identity`` (replaces this platform's
recording, keeps the others).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import re
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from minmaxlab import runner
from tests import _xla

FIXTURE = Path(__file__).parent / "data" / "step_fingerprints.json"
CONSTANT_LEAF = re.compile(r"\.hyperparams\['(b1|b2|eps|eps_root)'\]$")

# name -> (config module, overrides)
# (The recordings are of parameters stored as trees of layers: flat_params=False.)
POP2 = {"population_size": 2, "schedule": "lipizzaner", "d_every": 2, "opponents": "neighbourhood"}
CASES = {
  "smoke": ("smoke", {"flat_params": False}),
  "smoke_pop2_lipizzaner": ("smoke", dict(POP2, flat_params=False)),
}


def _config(name, **changes):
  module, overrides = CASES[name]
  config = importlib.import_module(f"experiments.coevolution.configs.{module}").get_config()
  for k, v in {**overrides, **changes}.items():
    config[k] = v
  return config


@functools.cache
def _case_run(name: str, flat_params: bool = False, codegen: str = "default"):
  """Two generations of case ``name`` (its parameters flat or as trees of layers), once per
  process and ``codegen``: ``"default"`` compiles with XLA's default code (the recordings
  are its bits), ``"session"`` with the session's own quicker code (no options: its
  ``XLA_FLAGS`` and -O0, tests/_xla.py) for a run compared to float rounding only. On a
  platform with a recording the fingerprint test and the flat-parameters test share the
  layered default-code run of the two-population case (one whole-generation compile fewer;
  one file is one xdist unit)."""
  options = {"default": _xla.DEFAULTS, "session": None}[codegen]
  return _two_generations(_config(name, flat_params=flat_params), options)


def _two_generations(config, options):
  from experiments.coevolution import experiment

  exp = experiment.build(config)
  init_key, gen_key, _ = experiment.keys(config)
  state = jax.jit(exp.coev.init, compiler_options=options)(init_key)
  step = jax.jit(exp.coev.step, compiler_options=options)
  for g in range(2):
    state, metrics = step(jax.random.fold_in(gen_key, g), state, exp.data)
  return state, metrics


def fingerprint(name: str) -> dict:
  """sha256 and float64 sum of every state leaf (and the metrics) after two generations."""
  leaves = jax.tree_util.tree_leaves_with_path(_case_run(name))
  out = {}
  for path, leaf in leaves:
    a = np.asarray(leaf)
    out[jax.tree_util.keystr(path)] = {
      "sha256": hashlib.sha256(a.tobytes()).hexdigest()[:16],
      "sum": float(np.sum(a.astype(np.float64))),
    }
  return out


def _platform() -> dict:
  """What the bits depend on: the JAX build, the CPU model and its widest vector unit."""
  return {
    "jax": jax.__version__,
    "cpu_model": runner.cpu_model(),
    "avx512": runner.cpu_has_avx512(),
  }


def _recordings_here() -> list[dict]:
  """The fixture's recordings made on this platform (none: the fingerprint tests skip)."""
  recordings = json.loads(FIXTURE.read_text())["recordings"]
  return [r for r in recordings if r["platform"] == _platform()]


@pytest.mark.slow  # two cold compiles of a whole generation step (about 20 CPU s each)
@pytest.mark.parametrize("name", sorted(CASES))
def test_two_generations_match_saved_fingerprints(name):
  here = _recordings_here()
  if not here:
    # XLA's CPU kernels round differently on another CPU kind (AVX-512 vs AVX2) or XLA build,
    # and a rounding difference can flip a tournament: no tolerance is safe across hosts.
    recorded = [r["platform"] for r in json.loads(FIXTURE.read_text())["recordings"]]
    pytest.skip(f"fingerprints recorded on {recorded}, this is {_platform()}")
  got = fingerprint(name)
  want = here[0]["cases"][name]
  # Recorded before Adam's constants left the state (``static_args``): those leaves held the
  # same constants in every individual and are gone; every other leaf must be there.
  gone = {k for k in set(want) - set(got) if CONSTANT_LEAF.search(k)}
  assert set(want) - gone <= set(got), sorted(set(want) - gone - set(got))
  want = {k: v for k, v in want.items() if k not in gone}
  bad = [k for k in want if got[k]["sha256"] != want[k]["sha256"]]
  assert not bad, f"{len(bad)} of {len(want)} leaves changed bits, e.g. {bad[:3]}"
  for k in want:  # the same sums too (a readable difference when a hash fails)
    np.testing.assert_allclose(got[k]["sum"], want[k]["sum"], rtol=0, atol=0, err_msg=k)


@pytest.mark.slow  # two cold compiles of a whole generation step
def test_flat_parameters_give_the_structured_results():
  """``flat_params=True`` (each network one vector, ``models.flat``) stores the same
  individuals: after two generations of the two-population Lipizzaner case every
  parameter, optimizer moment, slow weight, fitness and metric equals the layered run's,
  the vectors read in the trees' leaf order. Equal to float rounding, not bits: XLA's CPU
  kernels round an elementwise op on a 450-element vector and on its 16-element pieces
  differently (Adam alone differs by 1 ulp), and the flat run is compiled with the session's
  quicker code (``_case_run``), which rounds as differently."""
  # the layered run: the fingerprint test's own where it runs (this platform is recorded),
  # else compiled like the flat run (nothing to share, and half the compile)
  layered = "default" if _recordings_here() else "session"
  tree, tree_metrics = _case_run("smoke_pop2_lipizzaner", codegen=layered)
  flat, flat_metrics = _case_run("smoke_pop2_lipizzaner", flat_params=True, codegen="session")
  lead = tree.fitness.min.ndim  # (rows, cols, P)
  n_tree = len(jax.tree.leaves(tree.params)) + len(jax.tree.leaves(tree.opt_state))
  assert len(jax.tree.leaves(flat.params)) + len(jax.tree.leaves(flat.opt_state)) < n_tree / 2

  def row(t):  # one row per individual: its leaves raveled in tree order, counts included
    leaves = [np.asarray(x, np.float64) for x in jax.tree.leaves(t)]
    return np.concatenate([x.reshape(x.shape[:lead] + (-1,)) for x in leaves], -1)

  for field in ("params", "opt_state"):
    a, b = row(getattr(tree, field)), row(getattr(flat, field))
    assert a.shape == b.shape, field
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7, err_msg=field)

  def rest(s, m):
    return jax.tree.leaves((s.learning_rates, s.fitness, s.mixture_weights, s.mixture_score, m))

  for x, y in zip(rest(tree, tree_metrics), rest(flat, flat_metrics)):
    np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=1e-5, atol=1e-7)


if __name__ == "__main__":
  jax.config.update("jax_platforms", "cpu")
  result = {"platform": _platform(), "cases": {n: fingerprint(n) for n in sorted(CASES)}}
  others = [
    r for r in json.loads(FIXTURE.read_text())["recordings"] if r["platform"] != _platform()
  ]
  FIXTURE.write_text(json.dumps({"recordings": others + [result]}, indent=1, sort_keys=True) + "\n")
  n = sum(len(c) for c in result["cases"].values())
  print(f"wrote {FIXTURE} ({n} leaves)", file=sys.stderr)


def test_tree_all_finite_per_dtype_groups():
  """The concatenating check (one reduction per dtype) against a leaf-by-leaf numpy check."""
  from minmaxlab.transforms import tree_all_finite

  big = np.float32(3e38)
  tree = {
    "a": np.ones((2, 3), np.float32),
    "b": np.full(4, big, np.float32),  # finite, and overflows if promoted and summed
    "c": jax.numpy.asarray([1.0, 2.0], jax.numpy.bfloat16),
    "n": np.arange(3, dtype=np.int32),
  }
  assert bool(tree_all_finite(tree))
  assert bool(tree_all_finite({})) and bool(tree_all_finite({"n": np.arange(2)}))
  for leaf, bad in (("a", np.nan), ("b", np.inf), ("c", -np.inf)):
    t = dict(tree)
    x = np.array(t[leaf], np.float32)
    x.flat[-1] = bad
    t[leaf] = jax.numpy.asarray(x, jax.numpy.asarray(tree[leaf]).dtype)
    assert not bool(tree_all_finite(t)), leaf
    assert not bool(jax.jit(jax.vmap(tree_all_finite))(jax.tree.map(lambda y: y[None], t)))
