"""Reading MNIST-format IDX files (gzip-compressed or raw)."""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np

# IDX type codes (third magic byte) -> big-endian numpy dtype.
_IDX_TYPES = {
  0x08: np.dtype("u1"),
  0x09: np.dtype("i1"),
  0x0B: np.dtype(">i2"),
  0x0C: np.dtype(">i4"),
  0x0D: np.dtype(">f4"),
  0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
  with open(path, "rb") as f:
    raw = f.read()
  if not raw.startswith(_GZIP_MAGIC):
    return raw
  try:
    return gzip.decompress(raw)
  except (EOFError, OSError, zlib.error) as e:  # truncated or corrupt stream
    raise ValueError(f"IDX file {path}: corrupt or truncated gzip data ({e})") from e


def read_idx(path: str | os.PathLike) -> np.ndarray:
  """Read one IDX file (the MNIST format), gzip-compressed or not.

  Format: two zero bytes, a type code (``0x08`` unsigned byte, ``0x09``
  signed byte, ``0x0B`` int16, ``0x0C`` int32, ``0x0D`` float32, ``0x0E``
  float64), the number of dimensions ``nd``, then ``nd`` big-endian uint32
  sizes and the data in row-major order. Compression is detected from the
  gzip magic bytes, not from the file name.

  Args:
    path: the file.

  Returns:
    An array of the stored shape and type (native byte order).

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: wrong magic number, a truncated header or body, trailing
      bytes, or a corrupt gzip stream. Every message names the file.
  """
  path = Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"IDX file not found: {path}")
  data = _read_bytes(path)
  if len(data) < 4:
    raise ValueError(f"IDX file {path}: truncated header ({len(data)} bytes, need at least 4)")
  zero1, zero2, type_code, ndim = data[:4]
  if zero1 != 0 or zero2 != 0 or type_code not in _IDX_TYPES or ndim == 0:
    raise ValueError(
      f"IDX file {path}: wrong magic number 0x{data[:4].hex()} (expected 0x0000TTNN with type"
      f" TT in {{08, 09, 0b, 0c, 0d, 0e}} and NN >= 1 dimensions)"
    )
  header = 4 + 4 * ndim
  if len(data) < header:
    raise ValueError(f"IDX file {path}: truncated header ({len(data)} bytes, need {header})")
  shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
  dtype = _IDX_TYPES[type_code]
  expected = math.prod(shape) * dtype.itemsize
  body = len(data) - header
  if body < expected:
    raise ValueError(
      f"IDX file {path}: truncated data (shape {shape} needs {expected} bytes, found {body})"
    )
  if body > expected:
    raise ValueError(
      f"IDX file {path}: {body - expected} unexpected trailing bytes after shape {shape}"
    )
  array = np.frombuffer(data, dtype, count=math.prod(shape), offset=header).reshape(shape)
  return array.astype(dtype.newbyteorder("="))


def write_idx(path: str | os.PathLike, array: np.ndarray, compress: bool | None = None) -> None:
  """Write ``array`` as an IDX file (gzip if ``compress``, default: name ends in ``.gz``)."""
  array = np.asarray(array)
  codes = {dtype.newbyteorder("="): code for code, dtype in _IDX_TYPES.items()}
  native = array.dtype.newbyteorder("=")
  if native not in codes or array.ndim == 0:
    raise ValueError(f"cannot store dtype {array.dtype} with shape {array.shape} in IDX")
  code = codes[native]
  header = bytes([0, 0, code, array.ndim]) + b"".join(
    int(d).to_bytes(4, "big") for d in array.shape
  )
  payload = header + array.astype(_IDX_TYPES[code]).tobytes()
  path = Path(path)
  if compress is None:
    compress = path.suffix == ".gz"
  with open(path, "wb") as f:
    f.write(gzip.compress(payload) if compress else payload)


_PREFIX = {"train": "train", "test": "t10k"}


def find_idx_split(directory: str | os.PathLike, split: str) -> tuple[Path, Path]:
  """The (images, labels) files of a split in an MNIST-layout directory.

  Looks for ``{train,t10k}-images-idx3-ubyte`` and ``...-labels-idx1-ubyte``
  (also with ``.`` instead of the last ``-``, and with ``.gz``).
  """
  if split not in _PREFIX:
    raise ValueError(f"split must be 'train' or 'test', got {split!r}")
  directory = Path(directory)
  if not directory.is_dir():
    raise FileNotFoundError(f"IDX directory not found: {directory}")
  found = []
  for kind, nd in (("images", 3), ("labels", 1)):
    stems = [f"{_PREFIX[split]}-{kind}-idx{nd}-ubyte", f"{_PREFIX[split]}-{kind}.idx{nd}-ubyte"]
    names = [s + ext for s in stems for ext in ("", ".gz")]
    hits = [directory / n for n in names if (directory / n).is_file()]
    if not hits:
      raise FileNotFoundError(
        f"no IDX {kind} file for split {split!r} in {directory}: tried {names}"
      )
    found.append(hits[0])
  return found[0], found[1]


def read_idx_split(directory: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray]:
  """``(images uint8 [N, H, W], labels [N])`` of a split of an IDX directory."""
  images_path, labels_path = find_idx_split(directory, split)
  images, labels = read_idx(images_path), read_idx(labels_path)
  if images.ndim != 3 or labels.ndim != 1:
    raise ValueError(
      f"IDX files {images_path}, {labels_path}: expected images [N, H, W] and labels [N],"
      f" got {images.shape} and {labels.shape}"
    )
  if images.shape[0] != labels.shape[0]:
    raise ValueError(
      f"IDX files {images_path}, {labels_path}: {images.shape[0]} images but"
      f" {labels.shape[0]} labels"
    )
  return images, labels
