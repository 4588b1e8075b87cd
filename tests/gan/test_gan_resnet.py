"""The SN-ResNet 32x32 pair (SVRE / Lookahead-minmax CIFAR-10): shapes, sizes, spectral norm."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab.gan import models


def _normal(shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def _generator_count(latent, w, c):
  # dense to 4x4xw; 3 up-blocks (2 norms, 2 conv3x3, conv1x1 shortcut); norm; conv3x3 to c.
  block = 2 * (2 * w) + 2 * (9 * w * w + w) + (w * w + w)
  return (latent * 16 * w + 16 * w) + 3 * block + 2 * w + (9 * w * c + c)


def _discriminator_count(w, c):
  first = (9 * c * w + w) + (9 * w * w + w) + (c * w + w)  # conv3, conv3, conv1 shortcut
  down = 2 * (9 * w * w + w) + (w * w + w)
  plain = 2 * (9 * w * w + w)  # identity shortcut
  return first + down + 2 * plain + (w + 1)


def test_paper_sizes():
  # SN-GAN / SVRE CIFAR-10 ResNet: G 256 channels (4.28M), D 128 channels (1.05M).
  assert _generator_count(128, 256, 3) == 4_276_739
  assert _discriminator_count(128, 3) == 1_053_825
  pair = models.make_pair("sn_resnet", (32, 32, 3))
  assert pair.latent_dim == 128
  g = jax.eval_shape(pair.generator.init, jax.random.key(0))
  d = jax.eval_shape(pair.discriminator.init, jax.random.key(1))
  assert models.num_params(g) == 4_276_739 and models.num_params(d) == 1_053_825
  # 4 residual blocks in D, 3 in G.
  assert sum(k.startswith("DiscriminatorBlock") for k in d) == 4
  assert sum(k.startswith("GeneratorBlock") for k in g) == 3


@pytest.fixture(scope="module")
def small():
  pair = models.make_pair("sn_resnet", (32, 32, 3), latent_dim=16, width=8, n_power_iterations=1)
  g = pair.generator.init(jax.random.key(0))
  d = pair.discriminator.init(jax.random.key(1))
  return pair, g, d


def test_small_pair_forward_and_gradients(small):
  # One compiled program (generator, discriminator and both gradients) keeps the test fast.
  pair, g, d = small
  assert models.num_params(g) == _generator_count(16, 16, 3)
  assert models.num_params(d) == _discriminator_count(8, 3)
  z = _normal((6, 16))

  def hinge_g(g, d):
    x = pair.generator.apply(g, z)
    logits = pair.discriminator.apply(d, x)
    return jnp.mean(jax.nn.relu(1.0 - logits)), (x, logits)

  (_, (x, logits)), grads = jax.jit(jax.value_and_grad(hinge_g, (0, 1), has_aux=True))(g, d)
  assert x.shape == (6, 32, 32, 3) and x.dtype == jnp.float32
  assert float(jnp.max(jnp.abs(x))) <= 1.0 and float(jnp.std(x)) > 1e-3
  assert logits.shape == (6,) and bool(jnp.all(jnp.isfinite(logits)))
  for tree in grads:
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
      assert bool(jnp.all(jnp.isfinite(leaf))), path
      assert float(jnp.max(jnp.abs(leaf))) > 0, jax.tree_util.keystr(path)


def _kernels(params):
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  return [(jax.tree_util.keystr(p), v) for p, v in flat if p[-1].key == "kernel"]


def test_spectral_norm_keeps_every_top_singular_value_near_one(small):
  _, _, d = small
  kernels = _kernels(d)
  assert len(kernels) == 11  # 8 conv3x3 + 2 conv1x1 shortcuts + the linear layer
  normalize = jax.jit(models.spectral_normalize, static_argnums=1)
  for name, k in kernels:
    matrix = np.asarray(k).reshape(-1, k.shape[-1])
    normalised = np.asarray(normalize(k, 5)).reshape(matrix.shape)
    top = np.linalg.svd(normalised, compute_uv=False)[0]
    # A power-iteration estimate never exceeds sigma_max, so top >= 1; 5 iterations at a random
    # initialisation come within a few percent.
    assert 1.0 - 1e-5 <= top <= 1.15, (name, top)
    if min(matrix.shape) > 1:
      assert np.linalg.svd(matrix, compute_uv=False)[0] > 1.1, name  # SN actually rescaled it
    converged = np.asarray(normalize(k, 300))
    top = np.linalg.svd(converged.reshape(matrix.shape), compute_uv=False)[0]
    np.testing.assert_allclose(top, 1.0, atol=2e-3, err_msg=name)


def test_discriminator_uses_the_normalised_kernels(small):
  # W / sigma(W) does not change when W is scaled, so scaling every kernel leaves the output
  # unchanged with spectral norm and changes it without.
  pair, _, d = small
  x = _normal((4, 32, 32, 3), seed=1)
  scaled = jax.tree_util.tree_map_with_path(lambda p, v: 7.0 * v if p[-1].key == "kernel" else v, d)
  d_apply = jax.jit(pair.discriminator.apply)
  np.testing.assert_allclose(d_apply(scaled, x), d_apply(d, x), rtol=1e-4, atol=1e-5)
  plain = models.resnet_discriminator((32, 32, 3), 8, spectral_norm=False)
  assert models.num_params(d) == models.num_params(plain.init(jax.random.key(1)))
  plain_apply = jax.jit(plain.apply)
  out, out_scaled = plain_apply(d, x), plain_apply(scaled, x)
  assert float(jnp.max(jnp.abs(out_scaled - out))) > 1.0


def test_bad_arguments_raise():
  with pytest.raises(ValueError, match=r"\(32, 32, C\)"):
    models.resnet_generator((28, 28, 1))
  with pytest.raises(ValueError, match=r"\(32, 32, C\)"):
    models.make_pair("sn_resnet", (64, 64, 3))
  with pytest.raises(ValueError, match="width"):
    models.resnet_discriminator(width=0)
  with pytest.raises(ValueError, match="norm"):
    models.resnet_generator(norm="group")
  with pytest.raises(ValueError, match="unknown keyword"):
    models.make_pair("sn_resnet", (32, 32, 3), hidden=(4,))
  with pytest.raises(ValueError, match="sn_resnet"):
    models.make_pair("resnet", (32, 32, 3))
