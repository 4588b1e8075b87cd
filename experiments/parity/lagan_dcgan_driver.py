"""Runs the MNIST notebook's OWN network cell (``GeneratorCNN28``/``DiscriminatorCNN28``,
executed from the ``.ipynb`` of a LAGAN checkout given by path) on weights and batches
exported from the library, and records what it computes. Run by ``lagan_dcgan_golden.py``
in an interpreter with PyTorch; the project never imports torch.

The inputs (``--inputs``, npz): ``G/<name>``/``D/<name>`` (the ``state_dict`` parameter
names of the notebook's networks, PyTorch layout), ``z``, ``z2`` (latent batches) and
``real`` (``[B, 1, 28, 28]``). The run, in training mode as the notebook's ``train``:
``G(z)``, ``D(real)``, ``D(G(z))``; then one step of the notebook's AltGAN with its Adam
(lr 1e-3, betas (0.05, 0.999)) and its loss functions: the discriminator on
``(real, G(z).detach())``, then the generator on ``z2`` against the updated
discriminator. Written (``--out``, npz): the outputs, both losses, every parameter's
gradient and its value after the step.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from lagan_torch_driver import notebook_namespace  # noqa: E402

CELLS = ("class Lookahead(Optimizer)", "class GeneratorCNN28", "def train(G, D, dataset")
LR, BETAS = 1e-3, (0.05, 0.999)


def _load(torch, net, arrays, prefix, dtype):
  net = net.to(dtype)
  params = dict(net.named_parameters())
  given = {k[len(prefix) + 1 :] for k in arrays if k.startswith(prefix + "/")}
  if given != set(params):
    raise SystemExit(f"error: {prefix} parameters differ: {sorted(given ^ set(params))}")
  with torch.no_grad():
    for name, p in params.items():
      value = torch.as_tensor(arrays[f"{prefix}/{name}"]).to(dtype)
      if value.shape != p.shape:
        raise SystemExit(f"error: {prefix}/{name} has shape {tuple(value.shape)}, not {p.shape}")
      p.copy_(value)
  return net


def run(torch, lagan, arrays, dtype):
  ns = notebook_namespace(torch, lagan, CELLS)
  G = _load(torch, ns["GeneratorCNN28"](noise_dim=128, out_tanh=True), arrays, "G", dtype)
  D = _load(torch, ns["DiscriminatorCNN28"](spectral_norm=False, img_size=28), arrays, "D", dtype)
  G.train()
  D.train()
  t = {k: torch.as_tensor(arrays[k]).to(dtype) for k in ("z", "z2", "real")}
  out = {}
  with torch.no_grad():
    out["out/g_z"] = G(t["z"])
    out["out/d_real"] = D(t["real"])
    out["out/d_fake"] = D(G(t["z"]))
  batch = t["z"].shape[0]
  ones = torch.ones(batch, 1, dtype=dtype)
  zeros = torch.zeros(batch, 1, dtype=dtype)
  opt_d = torch.optim.Adam(D.parameters(), lr=LR, betas=BETAS)
  opt_g = torch.optim.Adam(G.parameters(), lr=LR, betas=BETAS)
  with torch.no_grad():
    x_gen = G(t["z"])
  opt_d.zero_grad()
  loss_d = ns["get_disciminator_loss"](D, t["real"], x_gen, ones, zeros)
  loss_d.backward()
  # the discriminator's gradient now (the generator's backward below adds to D's .grad)
  grad_d = {name: p.grad.clone() for name, p in D.named_parameters()}
  opt_d.step()
  opt_g.zero_grad()
  loss_g = ns["get_generator_loss"](G, D, t["z2"], ones)
  loss_g.backward()
  opt_g.step()
  out["loss/d"], out["loss/g"] = loss_d.detach(), loss_g.detach()
  for prefix, net in (("G", G), ("D", D)):
    for name, p in net.named_parameters():
      out[f"grad/{prefix}/{name}"] = p.grad if prefix == "G" else grad_d[name]
      out[f"after/{prefix}/{name}"] = p.detach()
  return {k: v.detach().cpu().double().numpy() for k, v in out.items()}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--lagan", required=True)
  parser.add_argument("--inputs", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
  args = parser.parse_args(argv)
  import numpy as np
  import torch

  torch.use_deterministic_algorithms(True)
  with np.load(args.inputs) as f:
    arrays = dict(f)
  got = run(torch, args.lagan, arrays, getattr(torch, args.dtype))
  np.savez(args.out, **got)


if __name__ == "__main__":
  main()
