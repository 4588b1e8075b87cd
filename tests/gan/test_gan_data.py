"""minmaxlab.gan.data: mixtures, IDX files, data sets, batching, the tfds round trip."""

import gzip
import importlib.util
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab.gan import data

HAS_TFDS = importlib.util.find_spec("tensorflow_datasets") is not None
HAS_FASHION = (data.FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").is_file()


# ----------------------------------------------------------------------------- mixtures


def test_ring8_and_grid25_modes():
  ring = data.ring8()
  modes = np.asarray(ring.modes)
  assert modes.shape == (8, 2) and float(ring.std) == pytest.approx(0.02)
  np.testing.assert_allclose(np.linalg.norm(modes, axis=1), 2.0, rtol=1e-6)
  angles = np.sort(np.mod(np.arctan2(modes[:, 1], modes[:, 0]), 2 * np.pi))
  np.testing.assert_allclose(np.diff(angles), np.pi / 4, rtol=1e-5)
  grid = data.grid25()
  assert float(grid.std) == pytest.approx(0.05)
  g = np.asarray(grid.modes)
  assert g.shape == (25, 2)
  assert sorted({tuple(p) for p in g.tolist()}) == [
    (x, y) for x in range(-4, 5, 2) for y in range(-4, 5, 2)
  ]
  with pytest.raises(ValueError):
    data.ring8(std=0.0)


@pytest.mark.parametrize("make", [data.ring8, data.grid25])
def test_mixture_sampling_statistics(make, key):
  mixture = make()
  n = 40_000
  # The mixture is a pytree argument of the compiled sampler.
  sample = jax.jit(lambda m, k: m.sample(k, n))
  x = np.asarray(sample(mixture, key))
  assert x.shape == (n, 2) and x.dtype == np.float32
  modes = np.asarray(mixture.modes)
  k = modes.shape[0]
  nearest = np.argmin(((x[:, None, :] - modes[None]) ** 2).sum(-1), axis=1)
  counts = np.bincount(nearest, minlength=k)
  # Uniform mode weights: each count is Binomial(n, 1/k); allow 5 standard deviations.
  sd = np.sqrt(n * (1 / k) * (1 - 1 / k))
  assert np.all(np.abs(counts - n / k) < 5 * sd)
  residual = x - modes[nearest]
  np.testing.assert_allclose(residual.std(axis=0), float(mixture.std), rtol=0.03)
  assert np.all(np.abs(residual.mean(axis=0)) < 5 * float(mixture.std) / np.sqrt(n))
  # Seeded: the same key gives the same samples, another key others.
  np.testing.assert_array_equal(x, np.asarray(sample(mixture, key)))
  assert not np.allclose(x[:10], np.asarray(sample(mixture, jax.random.fold_in(key, 1)))[:10])
  np.testing.assert_allclose(x[:10], np.asarray(mixture.sample(key, n))[:10], rtol=1e-6)  # eager


# ----------------------------------------------------------------------------- IDX files


def _idx_bytes(array, type_code=0x08):
  """IDX bytes built by hand (independent of data.write_idx)."""
  header = bytes([0, 0, type_code, array.ndim]) + b"".join(
    d.to_bytes(4, "big") for d in array.shape
  )
  return header + array.tobytes()


@pytest.mark.parametrize("compressed", [False, True])
def test_read_idx_hand_built_files(tmp_path, compressed):
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)
  floats = rng.normal(size=(2, 3)).astype(">f4")
  ints = rng.integers(-1000, 1000, (7,)).astype(">i4")
  for name, array, code in (("a", images, 0x08), ("b", floats, 0x0D), ("c", ints, 0x0C)):
    raw = _idx_bytes(array, code)
    path = tmp_path / (name + (".gz" if compressed else ""))
    path.write_bytes(gzip.compress(raw) if compressed else raw)
    got = data.read_idx(path)
    assert got.shape == array.shape and got.dtype.isnative
    np.testing.assert_array_equal(got, array)
  # write_idx round trip, compression chosen by the suffix but detected from the content.
  data.write_idx(tmp_path / "w.bin", images, compress=True)
  np.testing.assert_array_equal(data.read_idx(tmp_path / "w.bin"), images)


def test_read_idx_errors_name_the_file(tmp_path):
  missing = tmp_path / "nope-images-idx3-ubyte"
  with pytest.raises(FileNotFoundError, match="nope-images-idx3-ubyte"):
    data.read_idx(missing)
  good = _idx_bytes(np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
  cases = {
    "magic.idx": (b"\x12\x34" + good[2:], "wrong magic"),
    "type.idx": (good[:2] + b"\x07" + good[3:], "wrong magic"),
    "trunc.idx": (good[:-5], "truncated data"),
    "header.idx": (good[:9], "truncated header"),
    "tiny.idx": (good[:2], "truncated header"),
    "trailing.idx": (good + b"\x00", "trailing"),
    "trunc.idx.gz": (gzip.compress(good)[:-12], "gzip"),
  }
  for name, (payload, message) in cases.items():
    path = tmp_path / name
    path.write_bytes(payload)
    with pytest.raises(ValueError, match=message) as info:
      data.read_idx(path)
    assert str(path) in str(info.value)


def _write_idx_dir(directory, n_train=23, n_test=9, gz=True, seed=0):
  directory.mkdir(parents=True, exist_ok=True)
  rng = np.random.default_rng(seed)
  arrays = {}
  for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    images[0, 0, 0], images[0, 0, 1] = 0, 255
    labels = rng.integers(0, 10, (n,), dtype=np.uint8)
    labels[0] = 9
    ext = ".gz" if gz else ""
    for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
      raw = _idx_bytes(array)
      (directory / f"{prefix}-{kind}-ubyte{ext}").write_bytes(gzip.compress(raw) if gz else raw)
    arrays[split] = (images, labels)
  return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_load_idx_directory(tmp_path, gz):
  arrays = _write_idx_dir(tmp_path / "mnist", gz=gz)
  for prefix in ("idx:", "mnist_idx:"):
    for split in ("train", "test"):
      ds = data.load(f"{prefix}{tmp_path / 'mnist'}", split)
      images, labels = arrays[split]
      assert ds.images.shape == (*images.shape, 1) and ds.images.dtype == np.float32
      assert ds.labels.dtype == np.int32 and ds.num_classes == 10
      assert ds.num_examples == images.shape[0]
      np.testing.assert_allclose(ds.images[..., 0], images / 127.5 - 1, atol=1e-6)
      assert ds.images[0, 0, 0, 0] == -1.0 and ds.images[0, 0, 1, 0] == 1.0
      np.testing.assert_array_equal(ds.labels, labels)


def test_load_errors(tmp_path):
  (tmp_path / "empty").mkdir()
  with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte"):
    data.load(f"idx:{tmp_path / 'empty'}", "test")
  with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
    data.load("fashion_mnist", data_dir=tmp_path / "empty")
  with pytest.raises(ValueError, match="unknown data set"):
    data.load("cifar100")
  with pytest.raises(ValueError, match="split"):
    data.load(f"idx:{tmp_path / 'empty'}", "validation")
  # A truncated file inside a directory: the error names that file.
  _write_idx_dir(tmp_path / "bad", gz=False)
  labels = tmp_path / "bad" / "train-labels-idx1-ubyte"
  labels.write_bytes(labels.read_bytes()[:-3])
  with pytest.raises(ValueError, match="train-labels-idx1-ubyte"):
    data.load(f"idx:{tmp_path / 'bad'}")


@pytest.mark.skipif(not HAS_FASHION, reason="Debian package dataset-fashion-mnist not installed")
def test_real_fashion_mnist():
  train = data.load("fashion_mnist", "train")
  assert train.images.shape == (60000, 28, 28, 1) and train.images.dtype == np.float32
  assert train.images.min() == -1.0 and train.images.max() == 1.0
  np.testing.assert_array_equal(np.bincount(train.labels), np.full(10, 6000))
  test = data.load("fashion_mnist", "test")
  assert test.images.shape == (10000, 28, 28, 1) and set(np.unique(test.labels)) == set(range(10))


# ----------------------------------------------------------------------------- digits


def test_digits():
  from sklearn.datasets import load_digits

  ref = load_digits()
  native = data.load("digits8", "all")
  assert native.images.shape == (1797, 8, 8, 1) and native.num_classes == 10
  np.testing.assert_allclose(native.images[..., 0], ref.images / 8.0 - 1.0, atol=1e-6)
  np.testing.assert_array_equal(native.labels, ref.target)
  train, test = data.load("digits", "train"), data.load("digits", "test")
  assert train.images.shape == (1500, 28, 28, 1) and test.images.shape == (297, 28, 28, 1)
  np.testing.assert_array_equal(np.concatenate([train.labels, test.labels]), ref.target)
  assert train.images.min() >= -1.0 and train.images.max() <= 1.0
  # MNIST layout: a blank 4-pixel border, the digit inside the central 20x20 box.
  border = np.ones((28, 28), bool)
  border[4:24, 4:24] = False
  assert np.all(train.images[:, border, 0] == -1.0)
  # Linear upsampling keeps each image's mean intensity (to interpolation error).
  box_mean = train.images[:, 4:24, 4:24, 0].mean(axis=(1, 2))
  np.testing.assert_allclose(box_mean, native.images[:1500, :, :, 0].mean(axis=(1, 2)), atol=0.03)


# ----------------------------------------------------------------------------- batching


def _toy_dataset(n=10):
  images = np.arange(n, dtype=np.float32).reshape(n, 1, 1, 1) / n
  return data.ArrayDataset(
    images=images, labels=np.arange(n, dtype=np.int32), num_classes=n, name="toy"
  )


def test_batches_seeded_shuffled_drop_remainder(key):
  ds = _toy_dataset(10)
  first = list(data.batches(key, ds, 4, epochs=2))
  assert len(first) == 4  # 2 full batches per epoch, 2 examples dropped each epoch
  assert all(b.images.shape == (4, 1, 1, 1) and b.labels.shape == (4,) for b in first)
  for epoch in (first[:2], first[2:]):
    seen = np.concatenate([b.labels for b in epoch])
    assert len(set(seen.tolist())) == 8  # without replacement inside an epoch
  for b in first:
    np.testing.assert_allclose(b.images[:, 0, 0, 0], b.labels / 10, rtol=1e-6)  # pairs aligned
  again = list(data.batches(key, ds, 4, epochs=2))
  for a, b in zip(first, again, strict=True):
    np.testing.assert_array_equal(a.labels, b.labels)
  other = list(data.batches(jax.random.fold_in(key, 7), ds, 4, epochs=2))
  assert any(not np.array_equal(a.labels, b.labels) for a, b in zip(first, other, strict=True))
  assert not np.array_equal(np.sort(first[0].labels), np.arange(4))  # shuffled, not in order
  stream = data.batches(key, ds, 4, epochs=None)
  assert len([next(stream) for _ in range(7)]) == 7
  with pytest.raises(ValueError, match="exceeds"):
    next(data.batches(key, ds, 11))


def test_device_epoch_batches_match_host_batches(key):
  ds = _toy_dataset(10)
  host = list(data.batches(key, ds, 3, epochs=2))  # 3 batches per epoch
  on_device = (jnp.asarray(ds.images), jnp.asarray(ds.labels))
  step_fn = jax.jit(lambda step: data.epoch_batch(key, on_device, 3, step))
  for step, batch in enumerate(host):
    images, labels = step_fn(step)
    np.testing.assert_array_equal(labels, batch.labels)
    np.testing.assert_array_equal(images, batch.images)
  index = jax.jit(data.epoch_permutation, static_argnums=(1, 2))(key, 10, 3, 1)
  assert index.shape == (3, 3)
  np.testing.assert_array_equal(
    np.asarray(index).ravel(), np.concatenate([b.labels for b in host[3:]])
  )


def test_sample_batch_inside_jit(key):
  ds = _toy_dataset(50)
  images = jnp.asarray(ds.images)
  out = jax.jit(lambda k: data.sample_batch(k, images, 16))(key)
  assert out.shape == (16, 1, 1, 1)
  assert set(np.round(np.asarray(out).ravel() * 50).astype(int)) <= set(range(50))
  pair = jax.jit(lambda k: data.sample_batch(k, (images, jnp.asarray(ds.labels)), 16))(key)
  np.testing.assert_allclose(pair[0][:, 0, 0, 0], pair[1] / 50)
  np.testing.assert_array_equal(out, pair[0])  # same key, same indices
  # Uniform over examples: 64 draws of 16 from 50 cover every example.
  many = jax.jit(jax.vmap(lambda k: data.sample_batch(k, jnp.asarray(ds.labels), 16)))(
    jax.random.split(key, 64)
  )
  assert set(np.asarray(many).ravel().tolist()) == set(range(50))


# ----------------------------------------------------------------------------- tfds


@pytest.mark.skipif(not HAS_TFDS, reason="tensorflow-datasets (extra 'tfds') not installed")
def test_tfds_builder_round_trip_offline(tmp_path):
  import tensorflow_datasets as tfds

  arrays = _write_idx_dir(tmp_path / "idx", n_train=12, n_test=5, gz=True)
  data.prepare_idx_tfds(tmp_path / "idx", tmp_path / "tfds")
  assert list((tmp_path / "tfds" / "minmaxlab_idx_images").glob("*/*.array_record*"))
  for split in ("train", "test"):
    ds = data.load("tfds:minmaxlab_idx_images", split, data_dir=tmp_path / "tfds")
    images, labels = arrays[split]
    assert ds.name == "tfds:minmaxlab_idx_images" and ds.num_classes == 10
    np.testing.assert_array_equal(ds.labels, labels)
    np.testing.assert_allclose(ds.images[..., 0], images / 127.5 - 1, atol=1e-6)
  # tfds' own data-source API reads the same records.
  source = tfds.data_source("minmaxlab_idx_images", split="test", data_dir=str(tmp_path / "tfds"))
  assert len(source) == 5
  np.testing.assert_array_equal(source[3]["image"][..., 0], arrays["test"][0][3])


@pytest.mark.skipif(not HAS_TFDS, reason="tensorflow-datasets (extra 'tfds') not installed")
def test_tfds_errors(tmp_path):
  with pytest.raises(ValueError, match="no_such_dataset_xyz"):
    data.load("tfds:no_such_dataset_xyz", data_dir=tmp_path)
  # A builder whose data cannot be obtained (no manual directory): a clear RuntimeError, which
  # offline (as here and in CI) says how to prepare the data elsewhere.
  with pytest.raises(
    RuntimeError, match=r"could not download/prepare|is not prepared in .* there is no network"
  ):
    data.load("tfds:minmaxlab_idx_images", data_dir=tmp_path / "empty")


def test_tfds_missing_extra_gives_clear_error(monkeypatch):
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
  monkeypatch.delitem(sys.modules, "minmaxlab.gan.data._tfds", raising=False)
  with pytest.raises(ImportError, match=r"minmaxlab\[tfds\]"):
    data.load("tfds:mnist")
