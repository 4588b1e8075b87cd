"""tensorflow-datasets access without TensorFlow: array_record data sources.

Imported lazily (only for ``load("tfds:...")`` and :func:`prepare_idx_tfds`),
so the library does not need the optional ``tfds`` extra.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np

try:
  import tensorflow_datasets as tfds
except ImportError as e:  # pragma: no cover - exercised only without the extra
  raise ImportError(
    "tfds data sets need the optional extra: pip install 'minmaxlab[tfds]'"
    " (tensorflow-datasets and array-record; TensorFlow itself is not needed)"
  ) from e

from minmaxlab.gan.data._array import ArrayDataset, uint8_to_unit_range
from minmaxlab.gan.data._idx import read_idx_split

IDX_BUILDER_NAME = "minmaxlab_idx_images"


class MinmaxlabIdxImages(tfds.core.GeneratorBasedBuilder):
  """A tfds builder over a local directory of 28x28 MNIST-format IDX files.

  The directory is tfds' *manual* directory
  (``DownloadConfig(manual_dir=...)``): nothing is downloaded. Features:
  ``image`` uint8 ``[28, 28, 1]``, ``label`` one of 10 classes; splits
  ``train`` and ``test``, records in file order. Registered with tfds as ``minmaxlab_idx_images``.
  """

  VERSION = tfds.core.Version("1.0.0")
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
    "Put MNIST-format IDX files ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])"
    " in the manual directory."
  )

  def _info(self):
    return tfds.core.DatasetInfo(
      builder=self,
      description="28x28 MNIST-format IDX images from a local directory.",
      features=tfds.features.FeaturesDict(
        {
          "image": tfds.features.Tensor(shape=(28, 28, 1), dtype=np.uint8),
          "label": tfds.features.ClassLabel(num_classes=10),
        }
      ),
      supervised_keys=("image", "label"),
      disable_shuffling=True,  # keep the IDX order: record i is example i
    )

  def _split_generators(self, dl_manager):
    directory = dl_manager.manual_dir
    return {split: self._generate_examples(directory, split) for split in ("train", "test")}

  def _generate_examples(self, directory, split):
    images, labels = read_idx_split(directory, split)
    if images.shape[1:] != (28, 28):
      raise ValueError(
        f"{directory}: {IDX_BUILDER_NAME} needs 28x28 images, got {images.shape[1:]}"
      )
    for i in range(images.shape[0]):
      yield i, {"image": images[i][..., None], "label": int(labels[i])}


def prepare_idx_tfds(idx_dir: str | os.PathLike, data_dir: str | os.PathLike):
  """Prepare the tfds data set ``minmaxlab_idx_images`` from local IDX files.

  Writes array_record files under ``data_dir`` (no download, no
  TensorFlow); afterwards ``load("tfds:minmaxlab_idx_images",
  data_dir=data_dir)`` or ``tfds.data_source("minmaxlab_idx_images",
  data_dir=data_dir)`` reads them.

  Args:
    idx_dir: directory with ``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``.
    data_dir: the tfds data directory to write into.

  Returns:
    The prepared builder.
  """
  builder = MinmaxlabIdxImages(data_dir=os.fspath(data_dir), file_format="array_record")
  config = tfds.download.DownloadConfig(manual_dir=os.fspath(Path(idx_dir).resolve()))
  builder.download_and_prepare(download_config=config)
  return builder


def _read_all(source) -> list:
  n = len(source)
  getitems = getattr(source, "__getitems__", None)
  if getitems is not None:
    return list(getitems(list(range(n))))
  return [source[i] for i in range(n)]


DOWNLOAD_HOST = ("storage.googleapis.com", 443)  # where tfds downloads (and checks) data


def _online(timeout: float = 3.0) -> bool:
  """Whether tfds' download host answers within ``timeout`` seconds (instead of tfds'
  minutes of retries offline). ``MINMAXLAB_OFFLINE=1`` says no without trying."""
  if os.environ.get("MINMAXLAB_OFFLINE", "") not in ("", "0"):
    return False
  try:
    socket.create_connection(DOWNLOAD_HOST, timeout=timeout).close()
  except OSError:
    return False
  return True


def _offline_message(name: str, data_dir) -> str:
  where = f", data_dir={os.fspath(data_dir)!r}" if data_dir is not None else ""
  return (
    f"tfds data set {name!r} is not prepared{' in ' + os.fspath(data_dir) if data_dir else ''}"
    f" and there is no network: prepare it once on a machine with network access,"
    f' python -c "import tensorflow_datasets as tfds; tfds.builder({name!r}{where},'
    f" file_format='array_record').download_and_prepare()\", and copy the data directory here"
  )


def load_tfds(
  name: str, split: str, data_dir: str | os.PathLike | None, full_name: str | None = None
) -> ArrayDataset:
  """Load a tfds data set into memory through its array_record data source."""
  kwargs = {} if data_dir is None else {"data_dir": os.fspath(data_dir)}
  try:
    builder = tfds.builder(name, file_format="array_record", **kwargs)
  except Exception as e:  # unknown names, builders that need TensorFlow, ...
    raise ValueError(f"tfds cannot build {name!r}: {type(e).__name__}: {e}") from e
  if not builder.is_prepared():
    if not _online():
      raise RuntimeError(_offline_message(name, data_dir))
    try:
      builder.download_and_prepare()
    except Exception as e:
      raise RuntimeError(
        f"tfds could not download/prepare {name!r} into {builder.data_dir}"
        f" (a builder that needs TensorFlow?): {type(e).__name__}: {e}"
      ) from e
  try:
    source = builder.as_data_source(split=split)
  except Exception as e:
    raise ValueError(f"tfds data set {name!r} has no split {split!r}: {e}") from e
  records = _read_all(source)
  if records and not {"image", "label"} <= set(records[0]):
    raise ValueError(f"tfds data set {name!r} lacks 'image'/'label' features: {sorted(records[0])}")
  images = (
    np.stack([np.asarray(r["image"]) for r in records]) if records else np.zeros((0, 1, 1, 1))
  )
  labels = np.asarray([int(r["label"]) for r in records], np.int32)
  if images.dtype != np.uint8:
    raise ValueError(f"tfds data set {name!r}: expected uint8 images, got {images.dtype}")
  label_feature = builder.info.features["label"]
  num_classes = getattr(label_feature, "num_classes", None) or int(labels.max(initial=-1)) + 1
  return ArrayDataset(
    images=uint8_to_unit_range(images),
    labels=labels,
    num_classes=int(num_classes),
    name=full_name or name,
  )
