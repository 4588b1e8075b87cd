"""2-D convolutions (NHWC, HWIO) in two formulations with the same maths.

* ``"native"``: one ``lax.conv_general_dilated`` (a transposed convolution with
  ``lhs_dilation``), as flax writes them.
* ``"matmul"``: one matrix product plus strided slices or pads. A strided convolution
  gathers its ``kh * kw`` windows with strided slices (im2col) and multiplies them by the
  kernel as a ``[kh * kw * in, out]`` matrix; a transposed convolution multiplies the
  input by the kernel as an ``[in, kh * kw * out]`` matrix and adds each tap's block into
  the output at its offset with interior padding (col2im, PyTorch's own CPU route). Their
  derivatives are matrix products, slices and pads again: no ``lhs_dilation`` (the input
  gradient of a strided convolution) and no grouped convolution (what ``vmap`` over the
  kernels makes of a convolution) is left for the backend.

On XLA CPU several of the notebook DCGAN's native convolutions leave the Eigen kernels for
a naive loop: a stride-2 transposed convolution of a 3x3 input (its operands swapped by
the compiler), the kernel gradients of the transposed ones, the input gradient of a 7 -> 3
strided one, and, under ``vmap`` over seeds, nearly all of them. The matrix-product form
keeps every one of them in a matrix product (``experiments/benchmarks/dcgan_cpu.py``).
``"auto"`` picks ``"matmul"`` when JAX's default backend is the CPU and ``"native"``
elsewhere (cuDNN; the GPU side is not measured, so it keeps the native op). The two forms
sum the same products in a different order: they agree to float32 rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import jax
import jax.numpy as jnp
from jax import lax

ConvImpl = Literal["auto", "native", "matmul"]
CONV_IMPLS = get_args(ConvImpl)
_DIMS = ("NHWC", "HWIO", "NHWC")


def check_conv_impl(impl: Any) -> None:
  """``ValueError`` (one line naming the value) unless ``impl`` is one of :data:`CONV_IMPLS`."""
  if impl not in CONV_IMPLS:
    raise ValueError(f"conv_impl must be one of {CONV_IMPLS}, got {impl!r}")


def resolve_conv_impl(impl: ConvImpl) -> str:
  """``"native"`` or ``"matmul"``: ``"auto"`` is ``"matmul"`` on a CPU default backend."""
  check_conv_impl(impl)
  if impl == "auto":
    return "matmul" if jax.default_backend() == "cpu" else "native"
  return impl


def _pairs(value: int | Sequence[int]) -> tuple[int, int]:
  return (value, value) if isinstance(value, int) else tuple(int(v) for v in value)


def _conv_pads(padding: Any, kernel: Sequence[int], strides, spatial) -> list[tuple[int, int]]:
  if isinstance(padding, str):
    return lax.padtype_to_pads(spatial, kernel, strides, padding)
  if isinstance(padding, int):
    return [(padding, padding)] * 2
  return [_pairs(p) for p in padding]


def _transpose_pads(padding: Any, kernel: Sequence[int], strides) -> list[tuple[int, int]]:
  """``lax.conv_transpose``'s ``(lo, hi)`` for a string padding; explicit pads as given."""
  if not isinstance(padding, str):
    return [_pairs(p) for p in padding]
  if padding not in ("SAME", "VALID"):
    raise ValueError(f"padding must be 'SAME', 'VALID' or explicit pairs, got {padding!r}")
  pads = []
  for k, s in zip(kernel, strides):
    total = k + s - 2 + (max(k - s, 0) if padding == "VALID" else 0)
    lo = k - 1 if padding == "VALID" or s > k - 1 else -(-total // 2)
    pads.append((lo, total - lo))
  return pads


def conv2d(x, kernel, strides=(1, 1), padding: Any = "VALID", impl: ConvImpl = "native"):
  """``lax.conv_general_dilated(x, kernel, strides, padding)`` for NHWC ``x``, HWIO ``kernel``.

  ``padding``: ``"VALID"``, ``"SAME"``, an int or ``((lo, hi), (lo, hi))``.
  """
  strides = _pairs(strides)
  kh, kw, cin, cout = kernel.shape
  pads = _conv_pads(padding, (kh, kw), strides, x.shape[1:3])
  if resolve_conv_impl(impl) == "native":
    return lax.conv_general_dilated(x, kernel, strides, pads, dimension_numbers=_DIMS)
  (a, b), (c, d) = pads
  sh, sw = strides
  zero = jnp.zeros((), x.dtype)
  xp = lax.pad(x, zero, ((0, 0, 0), (a, b, 0), (c, d, 0), (0, 0, 0)))
  oh, ow = (xp.shape[1] - kh) // sh + 1, (xp.shape[2] - kw) // sw + 1
  if oh <= 0 or ow <= 0:
    raise ValueError(f"kernel {(kh, kw)} is larger than the padded input {xp.shape[1:3]}")
  windows = [
    lax.slice(
      xp,
      (0, i, j, 0),
      (xp.shape[0], i + sh * (oh - 1) + 1, j + sw * (ow - 1) + 1, cin),
      (1, sh, sw, 1),
    )
    for i in range(kh)
    for j in range(kw)
  ]
  patches = windows[0] if len(windows) == 1 else jnp.concatenate(windows, axis=-1)
  return jnp.dot(patches, kernel.reshape(kh * kw * cin, cout))


def conv_transpose2d(x, kernel, strides=(1, 1), padding: Any = "VALID", impl: ConvImpl = "native"):
  """flax's ``ConvTranspose`` (``lax.conv_transpose``, kernel not flipped) of NHWC ``x``.

  The same as ``conv_general_dilated(x, kernel, (1, 1), pads, lhs_dilation=strides)``;
  ``padding``: ``"VALID"``, ``"SAME"`` or ``((lo, hi), (lo, hi))`` (flax's convention).
  """
  strides = _pairs(strides)
  kh, kw, cin, cout = kernel.shape
  pads = _transpose_pads(padding, (kh, kw), strides)
  if resolve_conv_impl(impl) == "native":
    return lax.conv_general_dilated(
      x, kernel, (1, 1), pads, lhs_dilation=strides, dimension_numbers=_DIMS
    )
  (a, b), (c, d) = pads
  sh, sw = strides
  n, h, w, _ = x.shape
  dh, dw = (h - 1) * sh + 1, (w - 1) * sw + 1  # the input's size with zeros inserted
  oh, ow = dh + a + b - kh + 1, dw + c + d - kw + 1
  if oh <= 0 or ow <= 0:
    raise ValueError(
      f"kernel {(kh, kw)} is larger than the padded input {(dh + a + b, dw + c + d)}"
    )
  cols = jnp.dot(x, kernel.transpose(2, 0, 1, 3).reshape(cin, kh * kw * cout))
  cols = cols.reshape(n, h, w, kh, kw, cout)
  zero = jnp.zeros((), x.dtype)
  out = None
  for i in range(kh):  # tap (i, j) of input pixel (y, x) lands on output (a - i + sh*y, ...)
    for j in range(kw):
      lo_h, lo_w = a - i, c - j
      block = lax.pad(
        cols[:, :, :, i, j, :],
        zero,
        ((0, 0, 0), (lo_h, oh - lo_h - dh, sh - 1), (lo_w, ow - lo_w - dw, sw - 1), (0, 0, 0)),
      )
      out = block if out is None else out + block
  return out
