"""CIFAR-10 python batches: a tiny folder written here in the standard format, read back safely."""

import pickle
import tarfile

import numpy as np
import pytest

from minmaxlab.gan import data


def _batch(n, seed):
  rng = np.random.default_rng(seed)
  return {
    b"batch_label": b"batch %d" % seed,
    b"labels": [int(v) for v in rng.integers(0, 10, n)],  # a list, as in the real files
    b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
    b"filenames": [b"img_%d.png" % i for i in range(n)],
  }


def _dump(path, obj, numpy1_names=True):
  """Protocol 2 with numpy 1's module names (the real files came from Python 2 / numpy 1), or
  protocol 4 with numpy 2's names (a batch re-pickled today)."""
  raw = pickle.dumps(obj, protocol=2 if numpy1_names else 4)
  if numpy1_names and isinstance(obj, dict) and b"data" in obj:
    raw = raw.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    assert b"numpy.core.multiarray" in raw
  path.write_bytes(raw)


@pytest.fixture
def cifar_dir(tmp_path):
  folder = tmp_path / "cifar-10-batches-py"
  folder.mkdir()
  batches = {f"data_batch_{i}": _batch(3 + i, i) for i in range(1, 6)}
  batches["test_batch"] = _batch(4, 0)
  for name, batch in batches.items():
    _dump(folder / name, batch, numpy1_names=name != "data_batch_2")
  _dump(folder / "batches.meta", {b"label_names": [b"airplane"] * 10})
  return folder, batches


def test_read_cifar10_layout_and_order(cifar_dir):
  folder, batches = cifar_dir
  images, labels = data.read_cifar10(folder, "train")
  assert images.shape == (4 + 5 + 6 + 7 + 8, 32, 32, 3) and images.dtype == np.uint8
  assert labels.dtype == np.int32
  np.testing.assert_array_equal(
    labels, sum((batches[f"data_batch_{i}"][b"labels"] for i in range(1, 6)), [])
  )
  # Row layout: 1024 red, then 1024 green, then 1024 blue values, each a row-major 32x32 plane.
  row = batches["data_batch_1"][b"data"][2]
  for channel in range(3):
    for y, x in [(0, 0), (0, 31), (5, 7), (31, 0), (31, 31)]:
      assert images[2, y, x, channel] == row[1024 * channel + 32 * y + x]
  first_of_batch_2 = batches["data_batch_2"][b"data"][0].reshape(3, 32, 32).transpose(1, 2, 0)
  np.testing.assert_array_equal(images[4], first_of_batch_2)
  test_images, test_labels = data.read_cifar10(folder.parent, "test")  # the parent folder works
  assert test_images.shape == (4, 32, 32, 3)
  np.testing.assert_array_equal(test_labels, batches["test_batch"][b"labels"])


def test_load_cifar10_in_unit_range_and_from_archive(cifar_dir, tmp_path):
  folder, batches = cifar_dir
  ds = data.load(f"cifar10:{folder}", "test")
  assert ds.num_classes == 10 and ds.num_examples == 4 and ds.images.dtype == np.float32
  raw = batches["test_batch"][b"data"].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
  np.testing.assert_allclose(ds.images, raw / 127.5 - 1.0, atol=1e-6)
  assert ds.images.min() >= -1.0 and ds.images.max() <= 1.0
  same = data.load("cifar10", "test", data_dir=folder)
  np.testing.assert_array_equal(same.images, ds.images)
  # The downloaded archive, read without extracting it.
  archive = tmp_path / "cifar-10-python.tar.gz"
  with tarfile.open(archive, "w:gz") as tar:
    tar.add(folder, arcname="cifar-10-batches-py")
  for location in (archive, tmp_path):
    images, labels = data.read_cifar10(location, "train")
    np.testing.assert_array_equal(images, data.read_cifar10(folder, "train")[0])
  with pytest.raises(ValueError, match="cifar-10-batches-py"):
    data.load("cifar10")


class _Boom:
  def __reduce__(self):
    import os

    return (os.system, ("touch SHOULD_NOT_EXIST",))


def test_malicious_pickle_is_refused_without_running_code(cifar_dir, tmp_path, monkeypatch):
  folder, _ = cifar_dir
  monkeypatch.chdir(tmp_path)
  _dump(folder / "test_batch", {b"data": _Boom(), b"labels": []}, numpy1_names=False)
  with pytest.raises(pickle.UnpicklingError, match=r"refusing to load global (posix|os)\.system"):
    data.read_cifar10(folder, "test")
  assert not (tmp_path / "SHOULD_NOT_EXIST").exists()
  with pytest.raises(pickle.UnpicklingError, match="builtins.eval"):
    data.safe_load_pickle(b"cbuiltins\neval\n(S'1'\ntR.")


def test_malformed_batches_name_the_file(cifar_dir):
  folder, _ = cifar_dir
  (folder / "data_batch_3").unlink()
  with pytest.raises(FileNotFoundError, match="data_batch_3"):
    data.read_cifar10(folder, "train")
  bad = {
    "no labels": ({b"data": np.zeros((2, 3072), np.uint8)}, "no 'labels'"),
    "wrong row": ({b"data": np.zeros((2, 3000), np.uint8), b"labels": [0, 1]}, r"\[N, 3072\]"),
    "float": ({b"data": np.zeros((2, 3072)), b"labels": [0, 1]}, "uint8"),
    "count": ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}, "2 images"),
    "range": ({b"data": np.zeros((1, 3072), np.uint8), b"labels": [10]}, "outside"),
    "list": ([1, 2], "expected a dict"),
  }
  for obj, message in bad.values():
    _dump(folder / "test_batch", obj, numpy1_names=False)
    with pytest.raises(ValueError, match=message) as info:
      data.read_cifar10(folder, "test")
    assert "test_batch" in str(info.value)
  (folder / "test_batch").write_bytes(b"\x80\x02}q\x00(")  # truncated
  with pytest.raises(pickle.UnpicklingError, match="test_batch"):
    data.read_cifar10(folder, "test")
  with pytest.raises(ValueError, match="split"):
    data.read_cifar10(folder, "valid")
  with pytest.raises(FileNotFoundError):
    data.read_cifar10(folder / "nope", "test")
