"""GAN models as pure functions: ``Model(init, apply)`` over plain pytrees.

MLP (Lipizzaner MNIST sizes), DCGAN (Lookahead-minmax MNIST; 32x32xC) and
SN-ResNet (the SVRE / Lookahead-minmax CIFAR-10 pair) generators and
discriminators, optional spectral normalisation, and
:func:`make_pair` to build both for one data shape.
"""

from minmaxlab.gan.models._dcgan import (
  DCGANDiscriminator,
  DCGANGenerator,
  dcgan_discriminator,
  dcgan_generator,
)
from minmaxlab.gan.models._layers import (
  BatchStatNorm,
  Dense,
  spectral_norm_estimate,
  spectral_normalize,
)
from minmaxlab.gan.models._mlp import mlp_discriminator, mlp_generator
from minmaxlab.gan.models._model import GANPair, Model, flat, flat_pair, from_linen, num_params
from minmaxlab.gan.models._pair import make_pair
from minmaxlab.gan.models._resnet import resnet_discriminator, resnet_generator

__all__ = [
  "BatchStatNorm",
  "DCGANDiscriminator",
  "DCGANGenerator",
  "Dense",
  "GANPair",
  "Model",
  "dcgan_discriminator",
  "dcgan_generator",
  "flat",
  "flat_pair",
  "from_linen",
  "make_pair",
  "mlp_discriminator",
  "mlp_generator",
  "num_params",
  "resnet_discriminator",
  "resnet_generator",
  "spectral_norm_estimate",
  "spectral_normalize",
]
