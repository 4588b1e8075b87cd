"""The convolutions' two formulations (``minmaxlab/gan/models/_conv.py``): ``"matmul"``
(a matrix product with strided slices / interior pads) computes what ``"native"``
(``lax.conv_general_dilated``, ``lhs_dilation`` for the transposed ones) computes, forward and
both gradients, to float32 rounding, for every layer configuration of the ``"dcgan"`` and
``"dcgan_notebook"`` pairs (stride 1 and 2, PyTorch paddings 0 and 1, the 7x7 geometry's
output padding, ``"VALID"``) and a few more; under ``vmap`` over the kernels too. The
pairs' parameters do not depend on the formulation.

Tolerance: both sum the same float32 products in another order; ``RTOL = 1e-5`` of the
largest entry of the native result (a float32 sum of a few thousand terms of either sign
is off by a few 1e-7 of its terms' scale)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab.gan import models
from minmaxlab.gan.models._conv import conv2d, conv_transpose2d, resolve_conv_impl

RTOL = 1e-5

# (input size, in, out, kernel, stride, flax (lo, hi) padding) of transposed convolutions
TRANSPOSED = [
  (1, 5, 6, 3, 1, ((2, 2), (2, 2))),  # notebook and dcgan 28: 1 -> 3
  (3, 6, 4, 4, 2, ((2, 2), (2, 2))),  # notebook: 3 -> 6 (PyTorch padding 1)
  (6, 4, 3, 4, 2, ((3, 3), (3, 3))),  # notebook: 6 -> 14 (PyTorch padding 0)
  (3, 6, 4, 4, 2, ((2, 3), (2, 3))),  # dcgan 28: 3 -> 7 (output padding 1)
  (14, 3, 1, 4, 2, ((2, 2), (2, 2))),  # both: 14 -> 28
  (1, 5, 6, 4, 1, "VALID"),  # dcgan 32: 1 -> 4
  (5, 3, 2, 3, 2, ((0, 1), (1, 0))),  # asymmetric, some taps cropped
  (4, 2, 3, 3, 2, "SAME"),
]
# (input size, in, out, kernel, stride, padding) of convolutions
CONVS = [
  (28, 1, 4, 4, 2, 1),  # both discriminators: 28 -> 14
  (14, 4, 6, 4, 2, 1),  # 14 -> 7
  (7, 6, 5, 4, 2, 1),  # 7 -> 3 (the padded input's last row unused)
  (3, 5, 1, 3, 1, "VALID"),  # 3 -> 1
  (8, 3, 2, 4, 2, ((1, 1), (1, 1))),  # dcgan 32
  (9, 2, 3, 3, 2, ((1, 0), (2, 1))),
  (6, 3, 2, 3, 1, "SAME"),
]


def _inputs(size, cin, cout, k, batch=3, seeds=None):
  kx, kw = jax.random.split(jax.random.key(size * 100 + cin * 10 + k))
  lead = () if seeds is None else (seeds,)
  x = jax.random.normal(kx, (*lead, batch, size, size, cin))
  w = jax.random.normal(kw, (*lead, k, k, cin, cout)) / np.sqrt(k * k * cin)
  return x, w


def _close(mine, ref):
  ref = np.asarray(ref)
  np.testing.assert_allclose(mine, ref, rtol=0, atol=RTOL * float(np.abs(ref).max()))


def _compare(op, x, w, vmapped=False):
  """Forward, input gradient and kernel gradient of both formulations."""
  outs = {}
  for impl in ("native", "matmul"):
    f = lambda x, w, impl=impl: op(x, w, impl)  # noqa: E731
    if vmapped:
      f = jax.vmap(f)

    @jax.jit
    def run(x, w, f=f):
      y, vjp = jax.vjp(f, x, w)
      cot = jnp.cos(jnp.arange(y.size, dtype=y.dtype).reshape(y.shape))  # a fixed cotangent
      return (y, *vjp(cot))

    outs[impl] = run(x, w)
  for mine, ref in zip(outs["matmul"], outs["native"], strict=True):
    assert mine.shape == ref.shape
    _close(mine, ref)


@pytest.mark.parametrize("size,cin,cout,k,s,pad", TRANSPOSED)
def test_transposed_convolution_forms_agree(size, cin, cout, k, s, pad):
  x, w = _inputs(size, cin, cout, k)
  _compare(lambda x, w, impl: conv_transpose2d(x, w, s, pad, impl), x, w)


@pytest.mark.parametrize("size,cin,cout,k,s,pad", CONVS)
def test_convolution_forms_agree(size, cin, cout, k, s, pad):
  x, w = _inputs(size, cin, cout, k)
  _compare(lambda x, w, impl: conv2d(x, w, s, pad, impl), x, w)


def test_forms_agree_under_vmap_over_kernels():
  """Seeds vmapped (the lookahead study's arms): a batched kernel per seed."""
  x, w = _inputs(3, 6, 4, 4, seeds=2)
  _compare(lambda x, w, i: conv_transpose2d(x, w, 2, ((2, 2), (2, 2)), i), x, w, vmapped=True)
  x, w = _inputs(7, 6, 5, 4, seeds=2)
  _compare(lambda x, w, i: conv2d(x, w, 2, 1, i), x, w, vmapped=True)


def test_a_wrong_form_is_caught():
  """The comparison fails for a transposed convolution whose kernel is flipped (the
  PyTorch/flax convention difference) and for a padding off by one."""
  x, w = _inputs(3, 6, 4, 4)
  pad = ((2, 2), (2, 2))
  flipped = lambda x, w, impl: conv_transpose2d(  # noqa: E731
    x, w[::-1, ::-1] if impl == "matmul" else w, 2, pad, impl
  )
  with pytest.raises(AssertionError):
    _compare(flipped, x, w)
  shifted = lambda x, w, impl: conv_transpose2d(  # noqa: E731
    x, w, 2, ((3, 1), (2, 2)) if impl == "matmul" else pad, impl
  )
  with pytest.raises(AssertionError):
    _compare(shifted, x, w)


@pytest.mark.parametrize("arch,kw", [("dcgan_notebook", {}), ("dcgan", {"width": 4})])
def test_pairs_same_parameters_and_outputs_either_way(arch, kw):
  """Parameters (names, shapes, values) do not depend on ``conv_impl``; G(z) and D(G(z))
  and the discriminator's gradient agree."""
  pairs = {i: models.make_pair(arch, (28, 28, 1), conv_impl=i, **kw) for i in ("native", "matmul")}
  kg, kd, kz = jax.random.split(jax.random.key(3), 3)
  g = pairs["native"].generator.init(kg)
  d = pairs["native"].discriminator.init(kd)
  assert jax.tree.structure(g) == jax.tree.structure(pairs["matmul"].generator.init(kg))
  for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(pairs["matmul"].generator.init(kg))):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(jax.tree.leaves(d), jax.tree.leaves(pairs["matmul"].discriminator.init(kd))):
    np.testing.assert_array_equal(a, b)
  z = jax.random.normal(kz, (4, pairs["native"].latent_dim))
  out = {}
  for impl, pair in pairs.items():

    @jax.jit
    def run(g, d, z, pair=pair):
      x = pair.generator.apply(g, z)
      logit, grad = jax.value_and_grad(lambda d: jnp.sum(pair.discriminator.apply(d, x)))(d)
      return [x, logit, *jax.tree.leaves(grad)]

    out[impl] = run(g, d, z)
  for mine, ref in zip(out["matmul"], out["native"], strict=True):
    _close(mine, ref)


def test_auto_is_matmul_on_cpu_and_a_bad_value_is_refused():
  assert resolve_conv_impl("auto") == ("matmul" if jax.default_backend() == "cpu" else "native")
  with pytest.raises(ValueError, match="conv_impl must be one of .*'fast'"):
    models.make_pair("dcgan_notebook", (28, 28, 1), conv_impl="fast")
  with pytest.raises(ValueError, match="conv_impl must be one of .*'fast'"):
    models.dcgan_generator((28, 28, 1), conv_impl="fast")
