"""``make_pair``: a generator and a discriminator for one data shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minmaxlab.gan.models._dcgan import dcgan_discriminator, dcgan_generator
from minmaxlab.gan.models._dcgan_notebook import notebook_pair_models
from minmaxlab.gan.models._mlp import mlp_discriminator, mlp_generator
from minmaxlab.gan.models._model import GANPair
from minmaxlab.gan.models._resnet import resnet_discriminator, resnet_generator

_DEFAULT_LATENT = {"mlp": 64, "dcgan": 128, "dcgan_notebook": 128, "sn_resnet": 128}
_DEFAULT = object()


def make_pair(
  architecture: str,
  data_shape: Sequence[int],
  latent_dim: int | None = None,
  spectral_norm: bool | None = None,
  **kw: Any,
) -> GANPair:
  """A generator/discriminator pair for data of one example's shape.

  * ``"mlp"``: :func:`mlp_generator` + :func:`mlp_discriminator` (latent 64 by
    default, the Lipizzaner MNIST sizes). For vector data (``len(data_shape)
    == 1``, e.g. ``(2,)`` for the 2-D mixtures) the generator's output is
    linear, since the mixtures' modes lie outside [-1, 1]; for images it is
    tanh. Override with ``output_activation=``.
  * ``"dcgan"``: :func:`dcgan_generator` + :func:`dcgan_discriminator` for
    ``(28, 28, C)`` or ``(32, 32, C)`` (latent 128 by default).
  * ``"dcgan_notebook"``: the Lookahead-minmax MNIST notebook's own
    ``GeneratorCNN28``/``DiscriminatorCNN28`` for ``(28, 28, C)``, layer for
    layer (1 -> 3 -> 6 -> 14 -> 28, no convolution biases, PyTorch's default
    initialisation; latent 128, width 64, no option but ``conv_impl``; checked
    against the notebook's output in ``tests/parity/test_lagan_dcgan.py``).
  * ``"sn_resnet"``: :func:`resnet_generator` + :func:`resnet_discriminator`,
    the SVRE / Lookahead-minmax CIFAR-10 pair for ``(32, 32, C)`` (latent
    128; ``width`` = the discriminator's channels, default 128, the
    generator's are ``2 * width``; spectral normalisation in the
    discriminator unless ``spectral_norm=False`` is passed explicitly).

  Args:
    architecture: ``"mlp"``, ``"dcgan"``, ``"dcgan_notebook"`` or ``"sn_resnet"``.
    data_shape: one example's shape: ``(2,)``, ``(28, 28, 1)``, ``(32, 32, 3)``.
    latent_dim: size of :math:`z` (``None``: the architecture's default).
    spectral_norm: spectral normalisation in the discriminator (``None``: off,
      except for ``"sn_resnet"``).
    **kw: ``hidden`` and ``initializer`` (both MLPs: ``"fan_in_uniform"``,
      ``"torch"`` or ``"module"``, :func:`mlp_generator`), ``output_activation`` (MLP generator),
      ``width`` (both DCGANs), ``norm`` (DCGAN generator and discriminator),
      ``generator_norm``/``discriminator_norm`` (each side alone),
      ``n_power_iterations`` (discriminator), ``conv_impl`` (both DCGANs' convolutions:
      ``"auto"``, ``"native"`` or ``"matmul"``, :func:`dcgan_generator`).

  Returns:
    A :class:`GANPair`.
  """
  if architecture not in _DEFAULT_LATENT:
    raise ValueError(f"architecture must be one of {sorted(_DEFAULT_LATENT)}, got {architecture!r}")
  data_shape = tuple(int(d) for d in data_shape)
  latent_dim = _DEFAULT_LATENT[architecture] if latent_dim is None else int(latent_dim)
  kw = dict(kw)
  power = {k: kw.pop(k) for k in ["n_power_iterations"] if k in kw}
  if spectral_norm is None:
    spectral_norm = architecture == "sn_resnet"
  if architecture == "dcgan_notebook":
    if spectral_norm or power or kw.pop("width", 64) != 64:
      raise ValueError(
        "'dcgan_notebook' is the notebook's pair: width 64, no spectral_norm or n_power_iterations"
      )
    conv_impl = kw.pop("conv_impl", "auto")
    _no_extra(kw, architecture)
    generator, discriminator = notebook_pair_models(data_shape, latent_dim, conv_impl)
  elif architecture == "sn_resnet":
    width = kw.pop("width", 128)
    g_norm = kw.pop("generator_norm", kw.pop("norm", "batch"))
    _no_extra(kw, architecture)
    generator = resnet_generator(data_shape, latent_dim, 2 * width, g_norm)
    discriminator = resnet_discriminator(data_shape, width, spectral_norm, **power)
  elif architecture == "mlp":
    generator, discriminator = _mlp_pair(data_shape, latent_dim, spectral_norm, power, kw)
  else:
    width = kw.pop("width", 64)
    norm = kw.pop("norm", _DEFAULT)
    g_norm = kw.pop("generator_norm", "batch" if norm is _DEFAULT else norm)
    d_norm = kw.pop("discriminator_norm", "auto" if norm is _DEFAULT else norm)
    conv = {"conv_impl": kw.pop("conv_impl")} if "conv_impl" in kw else {}
    _no_extra(kw, architecture)
    generator = dcgan_generator(data_shape, latent_dim, width, g_norm, **conv)
    discriminator = dcgan_discriminator(data_shape, spectral_norm, width, d_norm, **power, **conv)
  return GANPair(generator=generator, discriminator=discriminator, latent_dim=latent_dim)


def _mlp_pair(data_shape, latent_dim, spectral_norm, power, kw):
  hidden = kw.pop("hidden", (256, 256))
  activation = kw.pop("output_activation", "tanh" if len(data_shape) > 1 else None)
  init = kw.pop("initializer", "fan_in_uniform")
  _no_extra(kw, "mlp")
  generator = mlp_generator(data_shape, latent_dim, hidden, activation, init)
  discriminator = mlp_discriminator(data_shape, hidden, spectral_norm, **power, initializer=init)
  return generator, discriminator


def _no_extra(kw, architecture):
  if kw:
    raise ValueError(f"unknown keyword arguments for {architecture!r}: {sorted(kw)}")
