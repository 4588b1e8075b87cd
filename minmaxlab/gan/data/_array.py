"""The in-memory image data set every loader returns, and the uint8 -> [-1, 1] scaling."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class ArrayDataset(NamedTuple):
  """An image data set held in host memory.

  Attributes:
    images: float32 ``[N, H, W, C]`` in [-1, 1].
    labels: int32 ``[N]``.
    num_classes: number of classes.
    name: the name it was loaded by.
  """

  images: np.ndarray
  labels: np.ndarray
  num_classes: int
  name: str

  @property
  def num_examples(self) -> int:
    """``N`` (``len`` of a NamedTuple counts its fields, so it is not overridden)."""
    return int(self.images.shape[0])


def uint8_to_unit_range(images: np.ndarray) -> np.ndarray:
  """uint8 pixels 0..255 -> float32 in [-1, 1] (``x / 127.5 - 1``).

  A channel axis is added to ``[N, H, W]`` input.
  """
  images = np.asarray(images)
  if images.ndim == 3:
    images = images[..., None]
  return (images.astype(np.float32) / np.float32(127.5) - np.float32(1.0)).astype(np.float32)
