"""The inputs of the LAGAN golden files: a small MLP generator/discriminator pair, its
initial weights, and the pools of latent noise and real batches every run draws from.

Everything comes from ``numpy.random.default_rng(SEED)``, so the golden script (which hands
the arrays to the reference code) and the tests (which hand them to the library) make the
same arrays without storing them; :func:`digest` pins them in each golden file's sidecar.

Weights are in the reference's (PyTorch) layout: ``weight`` is ``(out, in)`` and a layer is
``x @ weight.T + bias``. The generator is ``NZ -> H -> H -> DX`` with ReLU and a tanh output,
the discriminator ``DX -> H -> H -> 1`` with LeakyReLU(0.2) (the MNIST notebook's networks
are convolutional with batch norm, which the library's game optimizers do not need; the
notebook's training loop is what is compared).
"""

from __future__ import annotations

import hashlib

import numpy as np

SEED = 45
NZ, DX, H, BATCH = 8, 16, 32, 16
STEPS = 200
SNAPSHOTS = (1, 10, 200)
MAX_NOISE_PER_STEP, MAX_REAL_PER_STEP = 6, 5
G_SIZES = (NZ, H, H, DX)
D_SIZES = (DX, H, H, 1)


def _layers(rng, sizes):
  """PyTorch's default ``nn.Linear`` init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
  out = {}
  for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
    bound = 1.0 / np.sqrt(n_in)
    out[f"l{i}.weight"] = rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32)
    out[f"l{i}.bias"] = rng.uniform(-bound, bound, (n_out,)).astype(np.float32)
  return out


def make_inputs(steps: int = STEPS) -> dict[str, np.ndarray]:
  """Initial weights (``g/l0.weight`` ...), the noise pool ``noise[n, BATCH, NZ]`` and the
  real pool ``real[n, BATCH, DX]``, drawn in call order by the runs."""
  rng = np.random.default_rng(SEED)
  arrays = {f"g/{k}": v for k, v in _layers(rng, G_SIZES).items()}
  arrays.update({f"d/{k}": v for k, v in _layers(rng, D_SIZES).items()})
  arrays["noise"] = rng.standard_normal((steps * MAX_NOISE_PER_STEP, BATCH, NZ)).astype(np.float32)
  # "real" data: a fixed nonlinear image of a 3-D Gaussian, in (-1, 1) like the tanh output
  mix = rng.standard_normal((3, DX)).astype(np.float32)
  u = rng.standard_normal((steps * MAX_REAL_PER_STEP, BATCH, 3)).astype(np.float32)
  arrays["real"] = np.tanh(u @ mix + 0.3).astype(np.float32)
  return arrays


def digest(arrays: dict[str, np.ndarray]) -> str:
  """sha256 over the arrays (sorted by name), to check that both sides used the same inputs."""
  h = hashlib.sha256()
  for name in sorted(arrays):
    h.update(name.encode())
    h.update(np.ascontiguousarray(arrays[name]).tobytes())
  return h.hexdigest()
