"""``make_pair("dcgan_notebook")`` against the MNIST notebook's OWN networks (golden file).

``tests/parity/data/lagan_dcgan.npz`` holds what the notebook's ``GeneratorCNN28`` and
``DiscriminatorCNN28`` cells computed (PyTorch, float32 and float64) from the library's
initial weights and batches (``experiments.parity.lagan_dcgan_golden``; regenerate:
experiments/parity/README.md): ``G(z)``, ``D(real)``, ``D(G(z))``, then one step of the
notebook's AltGAN (its BCE losses, its Adam: lr 1e-3, betas (0.05, 0.999)): the
discriminator's loss, gradients and stepped parameters, then the generator's against the
updated discriminator.

Tolerance: the library's float32 result is compared with the notebook's float64 result;
each quantity may be off by ``FACTOR = 4`` times the notebook's own float32 run's distance
from its float64 run (the sidecar's ``float32_vs_float64_max_abs``, measured per quantity)
plus ``FLOOR = 1e-5`` of the quantity's largest entry. The generator's gradients through
batch norm over a batch of 8 are ill-conditioned: the notebook's float32 run differs from
its float64 one by up to 0.7% of their largest entry (the library's float32 run is within
2e-6 of the float64 one). The floor is for the generator's loss, taken through the
discriminator after its Adam step, where entries whose gradient is below rounding step
either way: the library is 1.8e-5 from the notebook's float64 value on a loss of 3.6 (the
notebook's float32 run: 9e-7); everything else is within ``FACTOR`` times the notebook's
own float32 gap. The generator's gradient quantities get ``G_REL = 1e-2`` of their largest entry in
place of the floor: the library's float32 result moves by a few 1e-4 of it with XLA's
compile options (the test session's quicker mode against the default). The first Adam
step moves each parameter by ``-lr * sign(g)`` unless ``|g|`` is below rounding: stepped
parameters are compared where the notebook's float64 gradient is past the gradient's
tolerance (at least half of the sampled entries), to ``1e-6`` plus the floor.

The structure test compares every parameter's name and shape with the notebook's
``state_dict`` (an added bias fails it); the perturbation tests show that the old 7x7
generator geometry and the library's ``"dcgan"`` initialiser's fan are caught.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments.parity import lagan_dcgan_golden as golden
from minmaxlab.gan.models import Model, from_linen
from minmaxlab.gan.models._dcgan_notebook import NotebookGenerator

DATA = pathlib.Path(__file__).parent / "data"
FACTOR, FLOOR = 4.0, 1e-5
STEP_AGREE = 1e-6
G_REL = 1e-2  # the generator's gradients: 1% of their largest entry


@functools.cache
def _golden():
  with np.load(DATA / "lagan_dcgan.npz") as f:
    arrays = dict(f)
  return arrays, json.loads((DATA / "lagan_dcgan.json").read_text())


def _library_run(gan) -> dict[str, np.ndarray]:
  """The notebook's one AltGAN step, through the library's pair and optax."""
  g, d, z, z2, real = golden.inputs(gan)
  gen, disc = gan.generator.apply, gan.discriminator.apply
  adam = optax.adam(1e-3, b1=0.05, b2=0.999, eps=1e-8)

  @jax.jit
  def step(g, d):
    x_gen = gen(g, z)
    out = {"out/g_z": x_gen, "out/d_real": disc(d, real), "out/d_fake": disc(d, x_gen)}

    def loss_d(d):
      return jnp.mean(jax.nn.softplus(-disc(d, real))) + jnp.mean(jax.nn.softplus(disc(d, x_gen)))

    out["loss/d"], grad_d = jax.value_and_grad(loss_d)(d)
    upd, _ = adam.update(grad_d, adam.init(d), d)
    d_new = optax.apply_updates(d, upd)

    def loss_g(g):
      return jnp.mean(jax.nn.softplus(-disc(d_new, gen(g, z2))))

    out["loss/g"], grad_g = jax.value_and_grad(loss_g)(g)
    upd, _ = adam.update(grad_g, adam.init(g), g)
    return out, (grad_g, grad_d), (optax.apply_updates(g, upd), d_new)

  out, grads, after = jax.device_get(step(g, d))
  out = {k: np.asarray(v) for k, v in out.items()}
  for prefix, grad, new in (("G", grads[0], after[0]), ("D", grads[1], after[1])):
    for path, (_, value) in golden.leaves(prefix, grad).items():
      idx = golden.sample_index(path, value.size)
      out[f"grad/{path}"] = np.asarray(value).reshape(-1)[idx]
      out[f"grad_norm/{path}"] = np.asarray(np.linalg.norm(value))
    for path, (_, value) in golden.leaves(prefix, new).items():
      out[f"after/{path}"] = np.asarray(value).reshape(-1)[golden.sample_index(path, value.size)]
  return out


def _mismatches(run: dict[str, np.ndarray]) -> dict[str, float]:
  """Per quantity, how far past its tolerance the run is (``> 0``: a mismatch)."""
  arrays, side = _golden()
  gaps = side["float32_vs_float64_max_abs"]
  bad = {}
  for key in gaps:
    ref, mine = arrays[f"f64/{key}"], run[key]
    scale = float(np.max(np.abs(ref)))
    if key.startswith("after/"):
      grad = np.abs(arrays[f"f64/grad/{key[6:]}"])
      grad_tol = FACTOR * gaps[f"grad/{key[6:]}"] + G_REL * float(grad.max())
      sure = grad > grad_tol  # the step's sign is not a matter of rounding
      assert sure.mean() >= 0.5, key
      err, tol = float(np.max(np.abs(mine - ref)[sure])), STEP_AGREE + FLOOR * scale
    else:
      rel = G_REL if key.startswith(("grad/G/", "grad_norm/G/")) else FLOOR
      err, tol = float(np.max(np.abs(mine - ref))), FACTOR * gaps[key] + rel * scale
    if err > tol:
      bad[key] = err - tol
  return bad


@functools.cache
def _exact_run():
  return _library_run(golden.pair())


def test_parameter_names_and_shapes_are_the_notebooks():
  """Every parameter's name and shape is the notebook's ``state_dict``'s (an added bias fails)."""
  g, d, *_ = golden.inputs()
  ours = {k: list(v.shape) for k, v in (golden.to_torch("G", g) | golden.to_torch("D", d)).items()}
  assert ours == _golden()[1]["torch_parameters"]


def test_forward_and_one_adam_step_match_the_notebook():
  """G(z), D(real), D(G(z)), both losses, gradients and one Adam step match the notebook's."""
  assert _mismatches(_exact_run()) == {}


def test_the_old_7x7_generator_geometry_is_caught():
  """The ``"dcgan"`` generator's 1-3-7-14-28 geometry, on the same weights, is caught."""
  gan = golden.pair()
  pads = ((2, 2), (2, 3), (2, 2), (2, 2))  # "dcgan" at 28x28: 1 -> 3 -> 7 -> 14 -> 28
  old = from_linen(NotebookGenerator(pads=pads), (golden.LATENT,), initializer="module")
  bad = _mismatches(_library_run(gan._replace(generator=Model(gan.generator.init, old.apply))))
  assert "out/g_z" in bad and "loss/g" in bad


@pytest.mark.parametrize("fan", ["torch", "library_conv_transpose"])
def test_initialisation_is_pytorchs_default(fan):
  """Every kernel ~ U(-1/sqrt(fan), 1/sqrt(fan)) with PyTorch's fan (``out * kh * kw`` for a
  transposed convolution); the fan of the input channels (``"dcgan"``'s) is caught."""
  g, d, *_ = golden.inputs()
  ok = []
  for prefix, params in (("G", g), ("D", d)):
    for path, (_, w) in golden.leaves(prefix, params).items():
      w = np.asarray(w)
      if w.ndim != 4:
        ok.append(np.all(w == (1.0 if path.endswith("scale") else 0.0)))
        continue
      transposed = "ConvTranspose" in path and fan == "torch"
      bound = 1 / math.sqrt(w.shape[0] * w.shape[1] * w.shape[3 if transposed else 2])
      peak, spread = np.abs(w).max() / bound, w.std() * math.sqrt(3) / bound
      ok.append(0.98 < peak <= 1.0 and abs(spread - 1) < 0.05)
  assert all(ok) == (fan == "torch")
