"""Image data sets as in-memory arrays in [-1, 1]."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from minmaxlab.gan.data._array import ArrayDataset, uint8_to_unit_range
from minmaxlab.gan.data._idx import read_idx_split

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
DIGITS_TRAIN_SIZE = 1500  # sklearn digits: the first 1500 of 1797 examples train, the rest test


def _linear_resize_matrix(src: int, dst: int) -> np.ndarray:
  """``[dst, src]`` linear interpolation with half-pixel centres (edge clamped)."""
  coords = np.clip((np.arange(dst) + 0.5) * src / dst - 0.5, 0, src - 1)
  low = np.floor(coords).astype(int)
  high = np.minimum(low + 1, src - 1)
  frac = coords - low
  matrix = np.zeros((dst, src))
  matrix[np.arange(dst), low] += 1 - frac
  matrix[np.arange(dst), high] += frac
  return matrix


def _digits(split: str, native: bool) -> ArrayDataset:
  try:
    from sklearn.datasets import load_digits
  except ImportError as e:  # pragma: no cover - scikit-learn is in the dev extra
    raise ImportError(
      "load('digits') needs scikit-learn (its data ships in the wheel):"
      " pip install 'minmaxlab[digits]'"
    ) from e
  bunch = load_digits()
  images = bunch.images.astype(np.float64) / 16.0  # [N, 8, 8] in [0, 1]
  labels = bunch.target.astype(np.int32)
  if not native:
    # MNIST layout: the digit scaled (bilinear) into the central 20x20 box of a 28x28 frame.
    resize = _linear_resize_matrix(8, 20)
    images = np.pad(resize @ images @ resize.T, ((0, 0), (4, 4), (4, 4)))
  images = (2.0 * images - 1.0).astype(np.float32)[..., None]
  if split == "train":
    sl = slice(0, DIGITS_TRAIN_SIZE)
  elif split == "test":
    sl = slice(DIGITS_TRAIN_SIZE, None)
  elif split == "all":
    sl = slice(None)
  else:
    raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
  name = "digits8" if native else "digits"
  return ArrayDataset(images=images[sl], labels=labels[sl], num_classes=10, name=name)


def _idx_dataset(directory: str | os.PathLike, split: str, name: str, num_classes: int | None):
  images, labels = read_idx_split(directory, split)
  labels = labels.astype(np.int32)
  if num_classes is None:
    num_classes = int(labels.max()) + 1 if labels.size else 0
  return ArrayDataset(
    images=uint8_to_unit_range(images), labels=labels, num_classes=num_classes, name=name
  )


def load(
  name: str, split: str = "train", data_dir: str | os.PathLike | None = None
) -> ArrayDataset:
  """Load an image data set into memory as float32 ``[N, H, W, C]`` in [-1, 1].

  Names:

  * ``"digits"``: scikit-learn's bundled 8x8 digits (1797 images, no
    download), each scaled by bilinear interpolation into the central 20x20
    box of a 28x28 frame, the layout of MNIST (whose digits are size-normalised
    to 20x20 and centred in 28x28), so that the 28x28 models apply unchanged.
    Splits: ``"train"`` = the first 1500 images, ``"test"`` = the other 297,
    ``"all"``.
  * ``"digits8"``: the same images at their native 8x8.
  * ``"fashion_mnist"``: the IDX files in ``data_dir`` (default
    ``/usr/share/datasets/fashion-mnist``, from the Debian package
    ``dataset-fashion-mnist``); 60000 train / 10000 test, 28x28x1.
  * ``"mnist_idx:<dir>"`` or ``"idx:<dir>"``: any directory of MNIST-format
    IDX files (``{train,t10k}-{images-idx3,labels-idx1}-ubyte``, gzip or not).
  * ``"cifar10:<dir>"`` (or ``"cifar10"`` with ``data_dir``): the CIFAR-10
    python batches (``cifar-10-batches-py``: ``data_batch_1..5`` train, 50000,
    ``test_batch`` test, 10000; 32x32x3), the folder, its parent or the
    ``cifar-10-python.tar.gz`` archive, read with an unpickler that only
    rebuilds numpy arrays (see :func:`read_cifar10`).
  * ``"tfds:<name>"``: a tensorflow-datasets data set through its data-source
    API (array_record files; needs the ``tfds`` extra; prepared in
    ``data_dir`` on first use, which downloads unless the data is already
    there). Images must be ``uint8 [H, W]`` or ``[H, W, C]`` under the
    feature ``"image"``, labels under ``"label"``.

  Args:
    name: see above.
    split: ``"train"`` or ``"test"`` (digits also ``"all"``; tfds any split
      string it accepts).
    data_dir: directory for ``fashion_mnist``, ``cifar10`` and ``tfds:``.

  Returns:
    An :class:`ArrayDataset`.

  Raises:
    FileNotFoundError: missing files (the message names them).
    ValueError: malformed files or an unknown name.
    ImportError / RuntimeError: ``tfds:`` without the extra, or when the data
      cannot be prepared (offline).
  """
  if name in ("digits", "digits8"):
    return _digits(split, native=name == "digits8")
  if name == "fashion_mnist":
    return _fashion_mnist(split, data_dir)
  for prefix in ("mnist_idx:", "idx:"):
    if name.startswith(prefix):
      directory = name[len(prefix) :]
      if not directory:
        raise ValueError(f"{name!r}: give a directory, e.g. 'idx:/path/to/mnist'")
      return _idx_dataset(directory, split, name, None)
  if name == "cifar10" or name.startswith("cifar10:"):
    return _cifar10(name, split, data_dir)
  if name.startswith("tfds:"):
    from minmaxlab.gan.data._tfds import load_tfds

    return load_tfds(name[len("tfds:") :], split, data_dir, full_name=name)
  raise ValueError(
    f"unknown data set {name!r}: use 'digits', 'digits8', 'fashion_mnist', 'idx:<dir>',"
    " 'mnist_idx:<dir>', 'cifar10:<dir>' or 'tfds:<name>'"
  )


def _fashion_mnist(split: str, data_dir) -> ArrayDataset:
  directory = Path(data_dir) if data_dir is not None else FASHION_MNIST_DIR
  try:
    return _idx_dataset(directory, split, "fashion_mnist", 10)
  except FileNotFoundError as e:
    raise FileNotFoundError(
      f"{e}. Fashion-MNIST is read from IDX files; on Debian/Ubuntu:"
      " apt-get install dataset-fashion-mnist (installs them in"
      f" {FASHION_MNIST_DIR}), or pass data_dir="
    ) from e


def _cifar10(name: str, split: str, data_dir) -> ArrayDataset:
  from minmaxlab.gan.data._cifar import CIFAR10_CLASSES, read_cifar10

  directory = name[len("cifar10:") :] or data_dir
  if not directory:
    raise ValueError(
      f"{name!r}: give the cifar-10-batches-py folder, as 'cifar10:<dir>' or data_dir="
    )
  images, labels = read_cifar10(directory, split)
  return ArrayDataset(
    images=uint8_to_unit_range(images), labels=labels, num_classes=CIFAR10_CLASSES, name=name
  )
