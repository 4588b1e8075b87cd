"""GAN data: 2-D Gaussian mixtures, image data sets in [-1, 1] (sklearn digits,
MNIST-format IDX directories such as Debian's Fashion-MNIST, the CIFAR-10 python
batches, tensorflow-datasets
through the optional ``tfds`` extra) and seeded minibatching on host or device."""

from minmaxlab.gan.data._array import ArrayDataset, uint8_to_unit_range
from minmaxlab.gan.data._batching import (
  Batch,
  batches,
  epoch_batch,
  epoch_permutation,
  sample_batch,
)
from minmaxlab.gan.data._cifar import read_cifar10, safe_load_pickle
from minmaxlab.gan.data._datasets import DIGITS_TRAIN_SIZE, FASHION_MNIST_DIR, load
from minmaxlab.gan.data._idx import find_idx_split, read_idx, read_idx_split, write_idx
from minmaxlab.gan.data._mixtures import Mixture, grid25, ring8


def prepare_idx_tfds(idx_dir, data_dir):
  """Prepare the tfds data set ``minmaxlab_idx_images`` (array_record) from a
  directory of 28x28 MNIST-format IDX files, offline and without TensorFlow;
  read it back with ``load("tfds:minmaxlab_idx_images", split, data_dir)``.
  Needs the ``tfds`` extra. See :mod:`minmaxlab.gan.data._tfds`."""
  from minmaxlab.gan.data._tfds import prepare_idx_tfds as prepare

  return prepare(idx_dir, data_dir)


__all__ = [
  "DIGITS_TRAIN_SIZE",
  "FASHION_MNIST_DIR",
  "ArrayDataset",
  "Batch",
  "Mixture",
  "batches",
  "epoch_batch",
  "epoch_permutation",
  "find_idx_split",
  "grid25",
  "load",
  "prepare_idx_tfds",
  "read_cifar10",
  "read_idx",
  "read_idx_split",
  "ring8",
  "safe_load_pickle",
  "sample_batch",
  "uint8_to_unit_range",
  "write_idx",
]
