"""Write the LAGAN golden files: the original code's parameters after 1, 10 and 200 steps.

    python -m experiments.parity.lagan_golden --lagan PATH --python /work/refvenv/bin/python \
        --commit bb7c80e --out tests/parity/data

For every case of ``lagan_torch_driver.CASES`` it hands the inputs of ``lagan_inputs`` to
the reference (a checkout at ``--lagan``, run by the interpreter ``--python``, which needs
PyTorch) twice, in float32 and in float64, and writes ``lagan_<case>.npz`` (both runs'
parameters, stored as float32) with a JSON sidecar: the command, the reference commit, the
torch version, the inputs' digest, the draws consumed, and the float32 run's largest
distance from the float64 one (the rounding floor the tolerance of
``tests/parity/test_lagan_golden.py`` is set against).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import subprocess
import sys
import tempfile

import numpy as np

from experiments.parity import lagan_inputs
from experiments.parity.lagan_torch_driver import (
  CASES,
  NOTEBOOK,
  NOTEBOOK_SETTINGS,
  TRAINER_SETTINGS,
)

DRIVER = pathlib.Path(__file__).with_name("lagan_torch_driver.py")
TORCH_VERSION = "import torch; print(torch.__version__)"
# What tests/parity/test_lagan_golden.py holds the library to (and why: its docstring).
TOLERANCE = {
  "float32_steps_1_10_max_abs": 2e-6,
  "float64_steps_1_10_200_max_abs": 1e-6,
  "perturbed_option_min_abs_at_200": 1e-4,
}


def _fail(msg):
  print(f"error: {msg}", file=sys.stderr)
  raise SystemExit(2)


def _commit(lagan: pathlib.Path, given: str | None) -> str:
  if given:
    return given
  got = subprocess.run(
    ["git", "-C", str(lagan), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
  )
  if got.returncode:
    _fail(f"--lagan {lagan} is not a git checkout: pass its commit with --commit")
  return got.stdout.strip()


def _run(python, lagan, inputs, case, dtype, workdir) -> dict[str, np.ndarray]:
  out = pathlib.Path(workdir) / f"{case}_{dtype}.npz"
  sizes = json.dumps([lagan_inputs.G_SIZES, lagan_inputs.D_SIZES])
  snaps = ",".join(map(str, lagan_inputs.SNAPSHOTS))
  cmd = [python, str(DRIVER), "--lagan", str(lagan), "--inputs", str(inputs), "--out", str(out)]
  cmd += ["--case", case, "--dtype", dtype, "--snapshots", snaps, "--sizes", sizes]
  got = subprocess.run(cmd, capture_output=True, text=True, check=False)
  if got.returncode:
    _fail(f"the reference run {case} ({dtype}) failed: {got.stderr.strip().splitlines()[-1:]}")
  with np.load(out) as f:
    return dict(f)


def _largest_gap(a, b) -> dict[str, float]:
  """Per snapshot, the largest |a - b| over every recorded parameter."""
  gaps = {}
  for s in lagan_inputs.SNAPSHOTS:
    keys = [k for k in a if k.startswith(f"s{s}/") and not k.endswith("draws")]
    gaps[str(s)] = max(float(np.max(np.abs(a[k] - b[k]))) for k in keys)
  return gaps


def write_case(case, python, lagan, commit, inputs_path, digest, out_dir, workdir, command):
  r32 = _run(python, lagan, inputs_path, case, "float32", workdir)
  r64 = _run(python, lagan, inputs_path, case, "float64", workdir)
  arrays = {
    f"f32/{k}": v.astype(np.float32 if v.dtype.kind == "f" else v.dtype) for k, v in r32.items()
  }
  arrays.update(
    {f"f64/{k}": v.astype(np.float32) for k, v in r64.items() if not k.endswith("draws")}
  )
  np.savez_compressed(out_dir / f"lagan_{case}.npz", **arrays)
  torch_version = subprocess.run(
    [python, "-c", TORCH_VERSION], capture_output=True, text=True, check=True
  ).stdout.strip()
  settings = NOTEBOOK_SETTINGS if CASES[case]["kind"] == "notebook" else TRAINER_SETTINGS
  sidecar = {
    "case": case,
    "reference": "Chavdarova/LAGAN-Lookahead_Minimax",
    "reference_commit": commit,
    "reference_code": (
      f"{NOTEBOOK}: Lookahead, train"
      if CASES[case]["kind"] == "notebook"
      else "lagan/trainer.py: Trainer.build_model, Trainer._update_pair; lagan/optim/lookahead.py"
    ),
    "options": CASES[case],
    "settings": settings,
    "torch": torch_version,
    "command": command,
    "inputs_sha256": digest,
    "snapshots": list(lagan_inputs.SNAPSHOTS),
    "draws_at_snapshots": {
      str(s): [int(x) for x in r32[f"s{s}/draws"]] for s in lagan_inputs.SNAPSHOTS
    },
    "float32_vs_float64_max_abs": _largest_gap(r32, r64),
    "tolerance": TOLERANCE,
  }
  (out_dir / f"lagan_{case}.json").write_text(json.dumps(sidecar, indent=2) + "\n")
  return sidecar


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--lagan", required=True, help="a checkout of LAGAN-Lookahead_Minimax")
  parser.add_argument("--python", required=True, help="an interpreter with torch")
  parser.add_argument("--out", default="tests/parity/data")
  parser.add_argument("--commit", default=None, help="the checkout's commit, if it has no .git")
  parser.add_argument("--cases", default=",".join(CASES))
  args = parser.parse_args(argv)
  lagan, out_dir = pathlib.Path(args.lagan), pathlib.Path(args.out)
  if not (lagan / "lagan" / "optim" / "lookahead.py").is_file():
    _fail(f"--lagan {lagan} has no lagan/optim/lookahead.py")
  if not pathlib.Path(args.python).is_file():
    _fail(f"--python {args.python} does not exist")
  cases = args.cases.split(",")
  for case in cases:
    if case not in CASES:
      _fail(f"--cases: unknown case {case!r} (known: {', '.join(CASES)})")
  commit = _commit(lagan, args.commit)
  out_dir.mkdir(parents=True, exist_ok=True)
  command = "python -m experiments.parity.lagan_golden " + " ".join(
    shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
  )
  arrays = lagan_inputs.make_inputs()
  with tempfile.TemporaryDirectory() as workdir:
    inputs_path = pathlib.Path(workdir) / "inputs.npz"
    np.savez(inputs_path, **arrays)
    for case in cases:
      side = write_case(
        case,
        args.python,
        lagan,
        commit,
        inputs_path,
        lagan_inputs.digest(arrays),
        out_dir,
        workdir,
        command,
      )
      print(case, "float32 vs float64:", side["float32_vs_float64_max_abs"])


if __name__ == "__main__":
  main()
