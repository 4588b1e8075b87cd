"""Runs the ORIGINAL LAGAN code (a checkout given by path) on the inputs of
``lagan_inputs`` and records what it computes. Run by ``lagan_golden.py`` in an interpreter
with PyTorch; the project itself never imports torch.

Nothing of the reference is copied: ``lagan/trainer.py`` and ``lagan/optim/lookahead.py``
are imported from the checkout, and the MNIST notebook's ``Lookahead`` and ``train`` are
executed from the cells of the ``.ipynb`` at run time. What the driver supplies:

- the networks (the ``models.resnet_models`` module the trainer imports, and the
  notebook's ``G``/``D`` arguments) and their initial weights;
- the draws: ``torch.randn`` of the batch's latent shape pops the next noise batch of the
  pool, and the real batches come from the pool (the notebook's ``get_sampler``, the
  trainer's ``data_gen``), so both sides consume the same draws in call order;
- a CPU run: ``.cuda()`` is the identity; the trainer's FID-only imports (tensorflow,
  ``fid``) are stubbed when missing; the notebook's ``save_models``/``plot_func`` write
  nothing;
- one compatibility shim: PyTorch >= 2 ``Optimizer.zero_grad`` reads ``self.defaults``,
  which the reference ``Lookahead`` (written for PyTorch 1.x) never sets; its ``zero_grad``
  is routed to the wrapped optimizer's (the same parameters, so the same effect).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import sys
import types

NOTEBOOK = "mnist/LA-AltGAN+LA-ExtraGrad.ipynb"
CASES = {
  "notebook_altgan": dict(kind="notebook", extragrad=False, lookahead=False),
  "notebook_la_altgan": dict(kind="notebook", extragrad=False, lookahead=True),
  "notebook_extragrad": dict(kind="notebook", extragrad=True, lookahead=False),
  "notebook_la_extragrad": dict(kind="notebook", extragrad=True, lookahead=True),
  "trainer_la_altgan": dict(kind="trainer", extra=False, lookahead=True, d_iters=5),
  "trainer_la_extra": dict(kind="trainer", extra=True, lookahead=True, d_iters=1),
}
# The notebook's settings (lr 1e-3, beta1 0.05, beta2 0.999) with k = 5; the trainer's
# defaults (lagan/parameter.py: g_lr 1e-4, d_lr 4e-4, betas (0, 0.9), hinge loss, k = 5).
NOTEBOOK_SETTINGS = dict(lr=1e-3, beta1=0.05, k=5)
TRAINER_SETTINGS = dict(g_lr=1e-4, d_lr=4e-4, beta1=0.0, beta2=0.9, k=5, alpha=0.5)


class _Draws:
  """The pools, popped in call order."""

  def __init__(self, torch, arrays, dtype):
    self.noise = torch.as_tensor(arrays["noise"]).to(dtype)
    self.real = torch.as_tensor(arrays["real"]).to(dtype)
    self.n_noise = self.n_real = 0

  def next_noise(self):
    self.n_noise += 1
    return self.noise[self.n_noise - 1].clone()

  def next_real(self):
    self.n_real += 1
    return self.real[self.n_real - 1].clone()


def _networks(torch, arrays, sizes_g, sizes_d, dtype):
  nn = torch.nn

  def mlp(sizes, act, out_act, prefix):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
      layers.append(nn.Linear(a, b))
      layers.append(act() if i < len(sizes) - 2 else out_act())
    net = nn.Sequential(*layers)
    with torch.no_grad():
      for i in range(len(sizes) - 1):
        net[2 * i].weight.copy_(torch.as_tensor(arrays[f"{prefix}/l{i}.weight"]))
        net[2 * i].bias.copy_(torch.as_tensor(arrays[f"{prefix}/l{i}.bias"]))
    return net.to(dtype)

  class Generator(nn.Module):
    def __init__(self, z_dim=sizes_g[0]):
      super().__init__()
      self.noise_dim = z_dim
      self.net = mlp(sizes_g, nn.ReLU, nn.Tanh, "g")

    def forward(self, z):
      return self.net(z)

  class Discriminator(nn.Module):
    def __init__(self):
      super().__init__()
      self.net = mlp(sizes_d, lambda: nn.LeakyReLU(0.2), nn.Identity, "d")

    def forward(self, x):
      return self.net(x)

  return Generator, Discriminator


def _flat(torch, net):
  """The MLP's parameters under the names of ``lagan_inputs`` (``l0.weight`` ...)."""
  seq = net.net
  out = {}
  for name, p in seq.named_parameters():
    idx, kind = name.split(".")
    out[f"l{int(idx) // 2}.{kind}"] = p.detach().cpu().double().numpy().copy()
  return out


def _patch_randn(torch, draws, shape):
  original = getattr(torch, "_lagan_parity_randn", torch.randn)
  torch._lagan_parity_randn = original

  def randn(*size, **kwargs):
    dims = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
    if dims == shape:
      z = draws.next_noise()
      return z.to(kwargs["device"]) if kwargs.get("device") is not None else z
    return original(*size, **kwargs)

  torch.randn = randn


def _shim_lookahead(torch, cls):
  cls.zero_grad = lambda self, set_to_none=True: self.optimizer.zero_grad(set_to_none)


NOTEBOOK_CELLS = ("class Lookahead(Optimizer)", "def train(G, D, dataset")
NETWORK_CELL = (
  "class GeneratorCNN28(nn.Module)"  # the notebook's DCGAN pair (and its MLP classifier)
)


def notebook_namespace(torch, lagan, wanted=NOTEBOOK_CELLS):
  """The namespace of the notebook's code cells that contain the ``wanted`` markers, each
  executed from the ``.ipynb`` (one cell per marker), with the cells' own imports."""
  import json as _json

  with open(f"{lagan}/{NOTEBOOK}") as f:
    cells = [c for c in _json.load(f)["cells"] if c["cell_type"] == "code"]
  ns = {"__name__": "lagan_notebook"}
  exec(
    "import copy, time, os\nimport numpy\nimport torch\nimport torch.nn as nn\n"
    "from collections import OrderedDict\nfrom torch.utils.data import DataLoader\n",
    ns,
  )
  for marker in wanted:
    src = ["".join(c["source"]) for c in cells if marker in "".join(c["source"])]
    if len(src) != 1:
      raise SystemExit(f"error: the notebook has {len(src)} cells with {marker!r}")
    exec(compile(src[0], f"{NOTEBOOK}:{marker}", "exec"), ns)
  _shim_lookahead(torch, ns["Lookahead"])
  return ns


def run_notebook(torch, lagan, arrays, case, dtype, snapshots, sizes):
  """The notebook's ``train`` for each snapshot length, from the same weights and draws."""
  ns = notebook_namespace(torch, lagan)
  Generator, Discriminator = _networks(torch, arrays, *sizes, dtype)
  batch, nz = arrays["noise"].shape[1:]
  out = {}
  ema, avg = ns["update_ema_gen"], ns["update_avg_gen"]
  for n in snapshots:
    draws = _Draws(torch, arrays, dtype)
    _patch_randn(torch, draws, (batch, nz))
    averages = {}

    def ema_spy(G, G_ema, beta_ema=0.9999, ema=ema):
      averages["g_ema"] = G_ema
      return ema(G, G_ema, beta_ema)

    def avg_spy(G, G_avg, n_gen_update, avg=avg):
      averages["g_avg"] = G_avg
      return avg(G, G_avg, n_gen_update)

    ns.update(
      update_ema_gen=ema_spy,
      update_avg_gen=avg_spy,
      save_models=lambda *a, **k: None,
      get_sampler=lambda *a, **k: lambda: (draws.next_real(), None),
    )
    G, D = Generator(), Discriminator()
    ns["train"](
      G,
      D,
      None,
      iterations=n,
      batch_size=batch,
      lrD=NOTEBOOK_SETTINGS["lr"],
      lrG=NOTEBOOK_SETTINGS["lr"],
      beta1=NOTEBOOK_SETTINGS["beta1"],
      eval_every=10**9,
      device=torch.device("cpu"),
      grad_max_norm=None,
      plot_func=lambda *a, **k: None,
      extragrad=case["extragrad"],
      lookahead=case["lookahead"],
      lookahead_k=NOTEBOOK_SETTINGS["k"],
      eval_avg=True,
      out_dir=None,
    )
    nets = dict(g=G, d=D, g_ema=averages["g_ema"], g_avg=averages["g_avg"])
    for name, net in nets.items():
      out.update({f"s{n}/{name}/{k}": v for k, v in _flat(torch, net).items()})
    out[f"s{n}/draws"] = [draws.n_noise, draws.n_real]
  return out


def _stub_missing(names):
  for name in names:
    try:
      __import__(name)
    except ImportError:
      parts = name.split(".")
      for i in range(1, len(parts) + 1):
        stub = types.ModuleType(".".join(parts[:i]))
        stub.__spec__ = importlib.machinery.ModuleSpec(stub.__name__, None)
        sys.modules.setdefault(stub.__name__, stub)


def _trainer(torch, lagan, arrays, case, dtype, sizes):
  sys.path.insert(0, f"{lagan}/lagan")
  _stub_missing(["tensorflow.compat.v1", "fid", "inception_utils"])
  torch.nn.Module.cuda = lambda self, *a, **k: self
  Generator, Discriminator = _networks(torch, arrays, *sizes, dtype)
  models = types.ModuleType("models")
  models.resnet_models = types.SimpleNamespace(Generator=Generator, Discriminator=Discriminator)
  sys.modules["models"], sys.modules["models.resnet_models"] = models, models.resnet_models
  import trainer as reference
  from optim import lookahead

  _shim_lookahead(torch, lookahead.Lookahead)
  t = reference.Trainer.__new__(reference.Trainer)
  s = TRAINER_SETTINGS
  t.__dict__.update(
    arch="resnet",
    z_dim=sizes[0][0],
    extra=case["extra"],
    parallel=False,
    optim="adam",
    g_lr=s["g_lr"],
    d_lr=s["d_lr"],
    g_beta1=s["beta1"],
    d_beta1=s["beta1"],
    beta2=s["beta2"],
    momentum=0,
    lookahead=case["lookahead"],
    lookahead_k=s["k"],
    lookahead_alpha=s["alpha"],
    lookahead_k_min=3,
    lookahead_k_max=1000,
    lookahead_super_slow_k=-1,
    adv_loss="hinge",
    d_iters=case["d_iters"],
    lr_scheduler=-1,
    batch_size=arrays["noise"].shape[1],
  )
  t.build_model()
  return t


def run_trainer(torch, lagan, arrays, case, dtype, snapshots, sizes):
  """``Trainer._update_pair`` step by step (the body of ``Trainer.train``'s loop)."""
  t = _trainer(torch, lagan, arrays, case, dtype, sizes)
  draws = _Draws(torch, arrays, dtype)
  _patch_randn(torch, draws, tuple(arrays["noise"].shape[1:]))

  def data_gen():
    while True:
      yield draws.next_real()

  t.data_gen = data_gen()
  out = {}
  for step in range(max(snapshots)):
    t._update_pair(step)
    if step + 1 in snapshots:
      nets = dict(
        g=t.G, d=t.D, g_ema=t.G_ema, g_avg=t.G_avg, g_ema_slow=t.G_ema_slow, g_avg_slow=t.G_avg_slow
      )
      for name, net in nets.items():
        out.update({f"s{step + 1}/{name}/{k}": v for k, v in _flat(torch, net).items()})
      out[f"s{step + 1}/draws"] = [draws.n_noise, draws.n_real]
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--lagan", required=True)
  parser.add_argument("--inputs", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--case", required=True, choices=sorted(CASES))
  parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
  parser.add_argument("--snapshots", default="1,10,200")
  parser.add_argument("--sizes", required=True, help="json [[g sizes], [d sizes]]")
  args = parser.parse_args(argv)
  import numpy as np
  import torch

  torch.set_num_threads(1)
  dtype = getattr(torch, args.dtype)
  torch.set_default_dtype(dtype)
  arrays = dict(np.load(args.inputs))
  case = CASES[args.case]
  snapshots = tuple(int(s) for s in args.snapshots.split(","))
  sizes = tuple(tuple(s) for s in json.loads(args.sizes))
  run = run_notebook if case["kind"] == "notebook" else run_trainer
  out = run(torch, args.lagan, arrays, case, dtype, snapshots, sizes)
  np.savez(args.out, **{k: np.asarray(v) for k, v in out.items()})
  print(json.dumps({"torch": torch.__version__, "case": args.case, "dtype": args.dtype}))


if __name__ == "__main__":
  main()
