"""One run of the ORIGINAL MNIST notebook of LAGAN (a checkout given by path) on the
Fashion-MNIST IDX files, and its generator samples at the endpoint. Run by
``lagan_outcome.py`` in an interpreter with PyTorch; the project itself never imports torch.

Nothing of the reference is copied: the notebook's networks (``GeneratorCNN28``,
``DiscriminatorCNN28``), ``Lookahead`` and ``train`` are executed from the cells of the
``.ipynb`` at run time (``lagan_torch_driver.notebook_namespace``), with the notebook's
arguments (cell "args": batch 50, lr 1e-3 for both, beta1 0.05, k = 1000, ``eval_avg``;
``lookahead`` on or off). What the driver supplies:

- the data: the IDX training images, scaled to [-1, 1] like the library's loader (the
  notebook's ``load_mnist`` gives ToTensor's [0, 1] against a tanh generator; a departure
  both systems share, named in the protocol), as a ``TensorDataset`` the notebook's own
  ``get_sampler`` shuffles (``n_workers=0``: no worker processes);
- the seed: ``torch.manual_seed`` before the networks are built (the notebook sets none);
- no side effects: ``save_models`` and ``plot_func`` write nothing, ``eval_every`` is past
  the horizon (the notebook's evaluation at step 0 only prints);
- the endpoint: ``update_ema_gen`` is spied on to hold the notebook's ``G_ema``; after
  ``train`` returns, ``--samples`` images of ``G_ema`` and of ``G`` (the iterate), drawn in
  batches of 500 in training mode (batch statistics, as the notebook samples), go to
  ``--out`` (npz, NHWC float32), written atomically: a finished run is never redone.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from lagan_torch_driver import NETWORK_CELL, NOTEBOOK_CELLS, notebook_namespace  # noqa: E402

NOTEBOOK_ARGS = dict(batch_size=50, lrD=1e-3, lrG=1e-3, beta1=0.05, lookahead_k=1000)
NOISE_DIM = 128
SAMPLE_BATCH = 500


def _idx_images(data_dir):
  import numpy as np

  raw = gzip.decompress(pathlib.Path(data_dir, "train-images-idx3-ubyte.gz").read_bytes())
  n, h, w = (int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(3))
  images = np.frombuffer(raw, np.uint8, offset=16).reshape(n, 1, h, w)
  return (2.0 * (images.astype(np.float32) / 255.0) - 1.0).astype(np.float32)


def _samples(torch, G, n, seed):
  gen = torch.Generator().manual_seed(10_000 + seed)
  out = []
  with torch.no_grad():
    for start in range(0, n, SAMPLE_BATCH):
      z = torch.randn(min(SAMPLE_BATCH, n - start), NOISE_DIM, generator=gen)
      out.append(G(z).permute(0, 2, 3, 1).cpu().numpy())
  import numpy as np

  return np.concatenate(out).astype(np.float32)


def run(lagan, data_dir, lookahead, seed, steps, n_samples, out):
  """Train the notebook's pair with its ``train`` for ``steps`` iterations; write the
  samples of its ``G_ema`` and ``G`` to ``out``."""
  import numpy as np
  import torch

  torch.set_num_threads(1)
  torch.manual_seed(seed)
  ns = notebook_namespace(torch, lagan, NOTEBOOK_CELLS + (NETWORK_CELL,))
  images = torch.as_tensor(_idx_images(data_dir))
  dataset = torch.utils.data.TensorDataset(images, torch.zeros(len(images), dtype=torch.long))
  held = {}
  ema = ns["update_ema_gen"]

  def ema_spy(G, G_ema, beta_ema=0.9999):
    held["g_ema"] = G_ema
    return ema(G, G_ema, beta_ema)

  ns.update(update_ema_gen=ema_spy, save_models=lambda *a, **k: None)
  G = ns["GeneratorCNN28"](noise_dim=NOISE_DIM, out_tanh=True)
  D = ns["DiscriminatorCNN28"](spectral_norm=False, img_size=28)
  t0, c0 = time.time(), time.process_time()
  ns["train"](
    G,
    D,
    dataset,
    iterations=steps,
    eval_every=10**9,
    n_workers=0,
    device=torch.device("cpu"),
    grad_max_norm=None,
    plot_func=lambda *a, **k: None,
    extragrad=False,
    lookahead=lookahead,
    eval_avg=True,
    out_dir=None,
    **NOTEBOOK_ARGS,
  )
  cpu, wall = time.process_time() - c0, time.time() - t0
  meta = dict(torch=torch.__version__, seed=seed, steps=steps, lookahead=lookahead, cpu_s=cpu)
  arrays = {"g_ema": _samples(torch, held["g_ema"], n_samples, seed)}
  arrays["g"] = _samples(torch, G, n_samples, seed)
  tmp = pathlib.Path(f"{out}.tmp.npz")
  np.savez(tmp, meta=np.asarray(json.dumps(meta)), **arrays)
  os.replace(tmp, out)
  print(json.dumps({**meta, "wall_s": wall}), flush=True)


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--lagan", required=True, help="a checkout of the reference")
  p.add_argument("--data", required=True, help="the Fashion-MNIST IDX folder")
  p.add_argument("--lookahead", action="store_true")
  p.add_argument("--seed", type=int, required=True)
  p.add_argument("--steps", type=int, required=True)
  p.add_argument("--samples", type=int, required=True)
  p.add_argument("--out", required=True)
  a = p.parse_args(argv)
  run(a.lagan, a.data, a.lookahead, a.seed, a.steps, a.samples, a.out)


if __name__ == "__main__":
  main()
