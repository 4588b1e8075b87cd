r"""Golden statistics of how Lipizzaner's own networks start (``initializer="torch"``'s check).

  python -m experiments.parity.lipizzaner_init_golden --lipizzaner /path/to/lipizzaner-gan \
      --python /path/to/python-with-torch [--out tests/parity/data/init_lipizzaner.json]

Runs the checkout's own ``FourLayerPerceptronFactory`` (its MNIST generator 64-256-256-784 and
discriminator 784-256-256-1, ``src/networks/network_factory.py``, imported from the checkout at
run time) with the interpreter that has torch, draws ``DRAWS`` fresh pairs and records per
layer the fan-in, the largest absolute kernel and bias entry and their variances over the
draws. ``tests/parity/test_lipizzaner_golden.py`` compares the library's
``make_pair("mlp", (28, 28, 1), initializer="torch")`` with them, without torch. A missing
checkout or interpreter is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests/parity/data/init_lipizzaner.json"
REFERENCE_COMMIT = "f411cb5"
DRAWS = 50

# Run by the torch interpreter with the checkout's src/ on sys.path (argv: src, draws).
_DRAW = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from networks.network_factory import FourLayerPerceptronFactory
torch.manual_seed(0)
factory = FourLayerPerceptronFactory(784, torch.nn.BCELoss())
out = {}
for side in ("generator", "discriminator"):
  make = getattr(factory, "create_" + side)
  nets = [make().net for _ in range(int(sys.argv[2]))]
  layers = []
  for k, layer in enumerate(l for l in nets[0] if hasattr(l, "weight")):
    w = torch.stack([[l for l in n if hasattr(l, "weight")][k].weight.detach() for n in nets])
    b = torch.stack([[l for l in n if hasattr(l, "weight")][k].bias.detach() for n in nets])
    layers.append({"fan_in": int(w.shape[-1]), "kernel_max": float(w.abs().max()),
                   "kernel_var": float(w.var()), "bias_max": float(b.abs().max()),
                   "bias_var": float(b.var())})
  out[side] = layers
out["torch"] = torch.__version__
print(json.dumps(out))
"""


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--lipizzaner", required=True, help="a checkout of ALFA-group/lipizzaner-gan")
  ap.add_argument("--python", required=True, help="an interpreter with torch")
  ap.add_argument("--out", default=str(OUT))
  args = ap.parse_args(argv)
  src = Path(args.lipizzaner) / "src"
  if not (src / "networks" / "network_factory.py").is_file():
    print(f"--lipizzaner {args.lipizzaner}: no Lipizzaner checkout there", file=sys.stderr)
    return 2
  try:
    done = subprocess.run(
      [args.python, "-c", _DRAW, str(src), str(DRAWS)], capture_output=True, text=True, timeout=600
    )
  except (OSError, subprocess.TimeoutExpired) as e:
    print(f"--python {args.python}: cannot run it ({e})", file=sys.stderr)
    return 2
  if done.returncode != 0:
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    print(f"--python {args.python}: the reference run failed ({last})", file=sys.stderr)
    return 2
  stats = json.loads(done.stdout.strip().splitlines()[-1])
  stats.update(
    command="python -m experiments.parity.lipizzaner_init_golden --lipizzaner PATH --python PY",
    reference_commit=REFERENCE_COMMIT,
    draws=DRAWS,
  )
  Path(args.out).write_text(json.dumps(stats, indent=1) + "\n")
  print(f"wrote {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
