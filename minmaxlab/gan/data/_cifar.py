"""CIFAR-10 from the standard python-batches folder (``cifar-10-batches-py``), read safely.

The folder holds pickles (``data_batch_1`` .. ``data_batch_5``, ``test_batch``) of a dict
``{b"data": uint8 [N, 3072], b"labels": [N ints], ...}``. A pickle may name any Python
callable, so they are read with an unpickler that resolves only the few numpy names an
array needs; anything else raises ``pickle.UnpicklingError`` before it is called.
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np

CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR10_SPLITS = {
  "train": tuple(f"data_batch_{i}" for i in range(1, 6)),
  "test": ("test_batch",),
}
CIFAR10_CLASSES = 10
_ROW = 3 * 32 * 32

# (module, name) pairs an array pickle needs (none runs code of the pickle's choosing);
# numpy 1.x wrote "numpy.core.*", numpy 2 writes "numpy._core.*" (the old name is mapped
# to the new one without importing it).
_ALLOWED = {
  ("numpy._core.multiarray", "_reconstruct"),
  ("numpy._core.multiarray", "scalar"),
  ("numpy._core.numeric", "_frombuffer"),
  ("numpy", "ndarray"),
  ("numpy", "dtype"),
  # Python 3 pickles of ``bytes`` at protocol <= 2 call codecs.encode(str, "latin1").
  ("_codecs", "encode"),
}


class _ArrayUnpickler(pickle.Unpickler):
  """Resolves only numpy array reconstruction; builtins need no globals (dict, list, bytes)."""

  def find_class(self, module, name):
    if module.startswith("numpy.core."):
      module = "numpy._core." + module[len("numpy.core.") :]
    if (module, name) not in _ALLOWED:
      raise pickle.UnpicklingError(
        f"refusing to load global {module}.{name}: a CIFAR batch holds only numpy arrays,"
        " lists and bytes"
      )
    return super().find_class(module, name)


def safe_load_pickle(data: bytes, source: str = "<bytes>"):
  """Unpickle ``data`` allowing only builtin containers and numpy arrays.

  Python 2 pickles (the CIFAR-10 files) are decoded with ``encoding="bytes"``,
  so their dict keys and strings come back as ``bytes``.

  Raises:
    pickle.UnpicklingError: the pickle names any other global (no code runs)
      or is corrupt; the message names ``source``.
  """
  try:
    return _ArrayUnpickler(io.BytesIO(data), encoding="bytes").load()
  except pickle.UnpicklingError as e:
    raise pickle.UnpicklingError(f"{source}: {e}") from e
  except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
    raise pickle.UnpicklingError(f"{source}: corrupt pickle ({type(e).__name__}: {e})") from e


def _field(batch: dict, key: str):
  for k in (key.encode(), key):
    if k in batch:
      return batch[k]
  raise KeyError(key)


def _decode_batch(data: bytes, source: str) -> tuple[np.ndarray, np.ndarray]:
  batch = safe_load_pickle(data, source)
  if not isinstance(batch, dict):
    raise ValueError(f"{source}: expected a dict, got {type(batch).__name__}")
  try:
    pixels, labels = _field(batch, "data"), _field(batch, "labels")
  except KeyError as e:
    raise ValueError(f"{source}: no {e} entry (keys: {sorted(map(str, batch))})") from e
  pixels, labels = np.asarray(pixels), np.asarray(labels)
  if pixels.dtype != np.uint8 or pixels.ndim != 2 or pixels.shape[1] != _ROW:
    raise ValueError(
      f"{source}: data must be uint8 [N, {_ROW}], got {pixels.dtype} {list(pixels.shape)}"
    )
  if labels.shape != (pixels.shape[0],) or not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(
      f"{source}: {pixels.shape[0]} images but labels of shape {list(labels.shape)}"
      f" ({labels.dtype})"
    )
  if labels.size and (labels.min() < 0 or labels.max() >= CIFAR10_CLASSES):
    raise ValueError(f"{source}: labels outside 0..{CIFAR10_CLASSES - 1}")
  # Rows are the red, green and blue planes of a 32x32 image, each row-major.
  images = pixels.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
  return np.ascontiguousarray(images), labels.astype(np.int32)


def _batch_bytes(location: Path, names: tuple[str, ...]) -> list[tuple[str, bytes]]:
  if location.is_file():  # the downloaded archive, read without extracting it
    with tarfile.open(location, "r:*") as tar:
      members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
      missing = [n for n in names if n not in members]
      if missing:
        raise FileNotFoundError(f"CIFAR-10 archive {location} lacks {missing}")
      return [(f"{location}:{n}", tar.extractfile(members[n]).read()) for n in names]
  folder = location
  if not (folder / names[0]).is_file():
    for candidate in (location / CIFAR10_FOLDER, location / CIFAR10_ARCHIVE):
      if candidate.exists():
        return _batch_bytes(candidate, names)
  missing = [n for n in names if not (folder / n).is_file()]
  if missing:
    raise FileNotFoundError(
      f"CIFAR-10 python batches not found: {folder} lacks {missing} (give the"
      f" {CIFAR10_FOLDER} folder, its parent, or {CIFAR10_ARCHIVE})"
    )
  return [(str(folder / n), (folder / n).read_bytes()) for n in names]


def read_cifar10(
  directory: str | os.PathLike, split: str = "train"
) -> tuple[np.ndarray, np.ndarray]:
  """Read a split of the CIFAR-10 python batches.

  Args:
    directory: the ``cifar-10-batches-py`` folder, a folder containing it,
      or the ``cifar-10-python.tar.gz`` archive (read without extracting).
    split: ``"train"`` (``data_batch_1`` .. ``data_batch_5``, in order) or
      ``"test"`` (``test_batch``).

  Returns:
    ``(images uint8 [N, 32, 32, 3], labels int32 [N])``.

  Raises:
    FileNotFoundError: a batch file is missing (the message lists them).
    ValueError: a batch is not a dict of ``data``/``labels`` of the right
      shapes and types.
    pickle.UnpicklingError: a batch names a global other than numpy's array
      reconstruction (nothing is executed) or is corrupt.
  """
  if split not in CIFAR10_SPLITS:
    raise ValueError(f"split must be 'train' or 'test', got {split!r}")
  location = Path(directory)
  if not location.exists():
    raise FileNotFoundError(f"CIFAR-10 location not found: {location}")
  parts = [
    _decode_batch(data, source) for source, data in _batch_bytes(location, CIFAR10_SPLITS[split])
  ]
  return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
