"""Run in the REFERENCE's interpreter (torch), inside a scratch copy of Lipizzaner's ``src/``
(``lipizzaner_fmnist_run.py`` starts every client and the master through this file):
Lipizzaner's own ``main.py`` on Fashion-MNIST, with one run-time addition. Nothing of the
reference's code is changed or copied.

The data are the reference's own ``mnist`` loader (torchvision's ``MNIST``) reading the
Fashion-MNIST IDX files put where it looks (``<output_dir>/data/MNIST/raw``): the same format
and shapes. Its scores are its own (``FIDCalculator`` with its bundled MNIST CNN).

The addition: in the master, each node's final mixture is written, when the master scores
it (``_gather_results``), to ``$FMNIST_EVAL_DIR/<node>.npz``: every sample of the reference's
own ``MixedGeneratorDataset`` (``master.score_sample_size`` of them, in ``[-1, 1]``, float32,
``[N, 784]``), the reference's score of it (its FID and class TVD), the mixture's generators
(``source``) and their weights, so that the outcome study scores every node's mixture with
one classifier for both systems.

Usage: ``python lipizzaner_fmnist_entry.py SRC main.py-ARGS...``.
"""

from __future__ import annotations

import os
import runpy
import sys


def _dump(np, torch, current, dataset, result, out: str) -> None:
  node = "{}-{}".format(current.node["address"], current.node["port"])
  with torch.no_grad():
    x = torch.stack([dataset[i].reshape(-1) for i in range(len(dataset))]).numpy()
  sources = [i.source for i in dataset.individuals]
  fid, tvd = result
  np.savez(
    os.path.join(out, node + ".npz"),
    samples=x.astype(np.float32),
    fid=float(fid),
    tvd=float(tvd),
    sources=np.array(sources),
    weights=np.array([float(current.weights.get(s, 0.0)) for s in sources]),
  )


def install() -> None:
  """Wrap the reference's ``FIDCalculator.calculate``: in the master, also write the mixture."""
  import numpy as np
  import torch

  torch.set_num_threads(1)
  import lipizzaner_ring_entry as ring  # the master watch (which node, which weights)
  from training.mixture import fid_score

  ring._watch_master()
  calculate = fid_score.FIDCalculator.calculate

  def wrapped(self, imgs, exact=True):
    result = calculate(self, imgs, exact)
    out = os.environ.get("FMNIST_EVAL_DIR")
    if out and ring._Current.node is not None:  # the master's final evaluation only
      _dump(np, torch, ring._Current, imgs, result, out)
    return result

  fid_score.FIDCalculator.calculate = wrapped


def main(argv) -> None:
  src, rest = argv[0], argv[1:]
  sys.path.insert(0, src)
  os.chdir(src)
  sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
  from lipizzaner_driver import _stub_modules

  _stub_modules()  # losswise (imported by main.py, disabled in the config), MongoDB
  install()
  sys.argv = ["main.py", *rest]
  runpy.run_path(os.path.join(src, "main.py"), run_name="__main__")


if __name__ == "__main__":
  main(sys.argv[1:])
