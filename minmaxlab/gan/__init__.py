"""The GAN stack: flax models as pure ``init``/``apply`` functions, GAN losses
for ``minmaxlab.vector_field``, data sets and evaluation metrics."""

from minmaxlab.gan import data, losses, metrics, models

__all__ = ["data", "losses", "metrics", "models"]
