r"""Golden files of Lipizzaner's own code (ALFA-group/lipizzaner-gan), phase by phase.

  python -m experiments.parity.lipizzaner_golden --lipizzaner /path/to/lipizzaner-gan \
      --python /path/to/python-with-torch [--out tests/parity/data]

Copies the checkout's ``src/`` to a scratch folder, runs ``lipizzaner_driver.py`` there with
the interpreter that has torch (the driver drives the reference's own ``LipizzanerGANTrainer``
for one generation of one cell, recording every random draw by run-time wrappers), and writes:

- ``lipizzaner_selection.npz``: a 3x3 grid, cell 1 (whose neighbourhood the reference
  transposes: {0, 4, 5, 6}), 2 individuals per cell, selection on, the discriminator
  skipping every other batch, the learning-rate mutation with probability 1;
- ``lipizzaner_noselection.npz``: the same grid, 1 individual, selection off (the local pair
  trains against the whole neighbourhood), the discriminator on every batch;
- ``lipizzaner_topology.json``: every cell's neighbour list by ``_adjacent_cells`` on 2x2,
  3x3 and 4x4 grids, and the seed ``get_heuristic_seed`` gives each client of a 3x3 grid;

each ``.npz`` with a JSON sidecar (command, reference commit, tolerance). The tests
(``tests/parity/test_lipizzaner_golden.py``) read them without torch. A missing checkout or
interpreter is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = HERE / "lipizzaner_driver.py"
OUT = REPO / "tests/parity/data"
REFERENCE_COMMIT = "f411cb5"
TOLERANCE = {
  "rtol": 1e-4,
  "atol": 2e-5,
  "why": (
    "float32 on both sides; the same draws, the same operations in another order (torch's "
    "sigmoid-then-BCELoss vs the library's softplus of logits, torch's Adam vs optax's): a "
    "few float32 ulps per step, growing over the 3-4 Adam steps to about 1e-6 of the weights"
  ),
}
MODES = [[2.0, 0.0], [0.0, 2.0], [-2.0, 0.0], [0.0, -2.0]]

COMMON = {
  "dim": 3,
  "cell": 1,
  "tournament_size": 2,
  "n_replacements": 1,
  "learning_rate": 0.01,
  "alpha": 0.2,
  "mutation_probability": 1.0,
  "mixture_sigma": 0.05,
  "fitness_samples": 12,
  "fitness_mode": "average",
  "batch_size": 6,
  "seed": 1,
  "latent_dim": 3,
  "hidden": 5,
  "modes": MODES,
}
CASES = {
  "selection": dict(
    COMMON,
    population_size=2,
    selection=True,
    discriminator_skip_each_nth_step=1,
    n_batches=3,
    init_seed=3,
  ),
  "noselection": dict(
    COMMON,
    population_size=1,
    selection=False,
    discriminator_skip_each_nth_step=0,
    n_batches=3,
    init_seed=4,
  ),
}


class InputError(Exception):
  """A bad command-line value: one line, exit status 2."""


def real_samples(n: int, seed: int) -> list:
  """``n`` samples of the 4 modes (std 0.05), the case's data set (numpy, fixed)."""
  rng = np.random.default_rng(seed)
  centres = np.asarray(MODES)[rng.integers(0, len(MODES), n)]
  return (centres + 0.05 * rng.standard_normal((n, 2))).round(6).tolist()


def source_dir(checkout: Path) -> Path:
  for src in (checkout / "src", checkout):
    if (src / "training/ea/lipizzaner_gan_trainer.py").is_file():
      return src
  raise InputError(
    f"--lipizzaner {checkout}: no Lipizzaner checkout there (want"
    " src/training/ea/lipizzaner_gan_trainer.py of ALFA-group/lipizzaner-gan)"
  )


def run_driver(python: str, src: Path, case: dict, scratch: Path) -> dict:
  case_path, out_path = scratch / "case.json", scratch / "out.json"
  case_path.write_text(json.dumps(case))
  try:
    proc = subprocess.run(
      [python, str(DRIVER), str(src), str(case_path), str(out_path)],
      capture_output=True,
      text=True,
      timeout=1200,
    )
  except (OSError, subprocess.TimeoutExpired) as e:
    raise InputError(f"--python {python}: cannot run it ({e})") from None
  if proc.returncode != 0:
    last = (proc.stderr.strip().splitlines() or ["?"])[-1]
    raise InputError(f"--python {python}: the reference run failed ({last})")
  return json.loads(out_path.read_text())


def sidecar(path: Path, argv: list, extra: dict) -> None:
  meta = {
    "command": "python -m experiments.parity.lipizzaner_golden " + " ".join(argv),
    "reference": f"ALFA-group/lipizzaner-gan {REFERENCE_COMMIT}",
    "driver": "experiments/parity/lipizzaner_driver.py (run in the reference's interpreter)",
    "tolerance": TOLERANCE,
  }
  meta.update(extra)
  path.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--lipizzaner", type=Path, required=True, help="a checkout of lipizzaner-gan")
  ap.add_argument("--python", required=True, help="an interpreter with torch and numpy")
  ap.add_argument("--out", type=Path, default=OUT)
  args = ap.parse_args(argv)
  from experiments.parity import lipizzaner_records as records

  try:
    src = source_dir(args.lipizzaner)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lipizzaner_golden_") as tmp:
      scratch = Path(tmp)
      shutil.copytree(src, scratch / "src", ignore=shutil.ignore_patterns("*.pt", ".git"))
      for name, case in CASES.items():
        case = dict(case, real=real_samples(case["batch_size"] * 8, case["init_seed"]))
        raw = run_driver(args.python, scratch / "src", case, scratch)
        arrays, meta = records.golden_arrays(raw)
        path = args.out / f"lipizzaner_{name}.npz"
        np.savez_compressed(path, **arrays)
        sidecar(path, argv, dict(meta, case=name))
        print(f"wrote {path} ({path.stat().st_size} bytes)")
      topo = run_driver(
        args.python, scratch / "src", {"kind": "topology", "dims": [2, 3, 4]}, scratch
      )
      path = args.out / "lipizzaner_topology.json"
      meta = {
        "command": "python -m experiments.parity.lipizzaner_golden " + " ".join(argv),
        "reference": f"ALFA-group/lipizzaner-gan {REFERENCE_COMMIT}",
      }
      path.write_text(json.dumps(dict(meta, **topo), indent=1) + "\n")
      print(f"wrote {path}")
  except InputError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
