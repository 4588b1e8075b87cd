"""minmaxlab.gan.models: shapes, ranges, sizes, purity, vmap, spectral norm."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from minmaxlab.gan import models

PAIRS = [
  ("mlp", (2,)),
  ("mlp", (28, 28, 1)),
  ("dcgan", (28, 28, 1)),
  ("dcgan", (32, 32, 3)),
]


def _normal(shape, seed=0):
  # numpy draws: a jax.random.normal compiles for 1-2 s on this CPU.
  return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def _init(pair, key):
  kg, kd = jax.random.split(key)
  return pair.generator.init(kg), pair.discriminator.init(kd)


# Every architecture and shape; spectral norm on one pair of each kind (the 28x28 DCGAN with
# spectral norm runs in test_spectral_norm_changes_only_the_discriminator_output...).
@pytest.mark.parametrize(
  "arch,shape,spectral_norm",
  [
    (a, s, sn)
    for a, s in PAIRS
    for sn in (False, True)
    if not (a == "dcgan" and sn == (s[0] == 28))
  ],
)
def test_pair_shapes_and_ranges(arch, shape, spectral_norm, key):
  width = {"width": 8} if arch == "dcgan" else {"hidden": (32, 32)}
  pair = models.make_pair(arch, shape, spectral_norm=spectral_norm, **width)
  assert pair.latent_dim == {"mlp": 64, "dcgan": 128}[arch]
  g, d = _init(pair, key)
  z = _normal((6, pair.latent_dim))
  x = jax.jit(pair.generator.apply)(g, z)
  assert x.shape == (6, *shape) and x.dtype == jnp.float32
  if len(shape) > 1:  # images: tanh output
    assert float(jnp.max(jnp.abs(x))) <= 1.0
  logits = jax.jit(pair.discriminator.apply)(d, x)
  assert logits.shape == (6,) and bool(jnp.all(jnp.isfinite(logits)))


def test_mixture_generator_is_linear_and_reaches_outside_unit_box(key):
  pair = models.make_pair("mlp", (2,), hidden=(16,))
  g, _ = _init(pair, key)
  # Scale the output layer: a linear head follows, a tanh head would saturate at 1.
  g = jax.tree.map(lambda p: p, g)
  last = sorted(g)[-1]
  g[last] = {k: 50.0 * v for k, v in g[last].items()}
  x = jax.jit(pair.generator.apply)(g, _normal((64, 64)))
  assert float(jnp.max(jnp.abs(x))) > 2.0


def test_lipizzaner_mnist_mlp_sizes(key):
  # Lipizzaner four_layer_perceptron: G 64-256-256-784, D 784-256-256-1.
  g_count = (64 * 256 + 256) + (256 * 256 + 256) + (256 * 784 + 784)
  d_count = (784 * 256 + 256) + (256 * 256 + 256) + (256 + 1)
  assert (g_count, d_count) == (283_920, 267_009)
  pair = models.make_pair("mlp", (28, 28, 1))
  g, d = _init(pair, key)
  assert models.num_params(g) == g_count and models.num_params(d) == d_count


def test_dcgan_mnist_sizes(key):
  # Lookahead-minmax MNIST: G ConvT 128->512 (3x3) ->256->128->1 (4x4), BN; D Conv 1->64->128->256
  # (4x4) ->1 (3x3), BN after convs 2 and 3. Kernels before a batch norm carry no bias.
  g_count = (
    128 * 512 * 9 + 512 * 256 * 16 + 256 * 128 * 16 + 128 * 1 * 16 + 1 + 2 * (512 + 256 + 128)
  )
  d_count = 16 * 64 + 64 + 64 * 128 * 16 + 128 * 256 * 16 + 256 * 9 + 1 + 2 * (128 + 256)
  pair = models.make_pair("dcgan", (28, 28, 1))
  g, d = _init(pair, key)
  assert models.num_params(g) == g_count and models.num_params(d) == d_count
  assert abs(g_count - 3.22e6) < 0.01e6 and abs(d_count - 0.66e6) < 0.01e6


def test_vmap_over_population_matches_members(key):
  pair = models.make_pair("dcgan", (28, 28, 1), width=4)
  keys = jax.random.split(key, 3)
  gs = jax.vmap(pair.generator.init)(keys)
  ds = jax.vmap(pair.discriminator.init)(keys)
  z = jnp.asarray(np.random.default_rng(0).normal(size=(5, 128)), jnp.float32)
  xs = jax.jit(jax.vmap(pair.generator.apply, in_axes=(0, None)))(gs, z)
  ls = jax.jit(jax.vmap(pair.discriminator.apply))(ds, xs)
  assert xs.shape == (3, 5, 28, 28, 1) and ls.shape == (3, 5)
  g_apply, d_apply = jax.jit(pair.generator.apply), jax.jit(pair.discriminator.apply)
  for i in range(3):
    gi = jax.tree.map(lambda a, i=i: a[i], gs)
    di = jax.tree.map(lambda a, i=i: a[i], ds)
    np.testing.assert_allclose(xs[i], g_apply(gi, z), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ls[i], d_apply(di, xs[i]), rtol=1e-4, atol=1e-4)
  # Different keys give different members; the same key the same member.
  assert not np.allclose(xs[0], xs[1])
  np.testing.assert_array_equal(
    jax.tree.leaves(pair.generator.init(keys[1]))[0], jax.tree.leaves(gs)[0][1]
  )


def test_params_are_plain_pytrees_and_gradients_flow(key):
  pair = models.make_pair("mlp", (28, 28, 1), hidden=(16,))
  g, d = _init(pair, key)
  assert isinstance(g, dict) and all(isinstance(x, jax.Array) for x in jax.tree.leaves(g))
  z = _normal((4, 64))
  grads = jax.jit(
    jax.grad(lambda g: jnp.sum(pair.discriminator.apply(d, pair.generator.apply(g, z))))
  )(g)
  assert all(float(jnp.abs(x).sum()) > 0 for x in jax.tree.leaves(grads))


def test_flat_models_are_the_same_functions_of_one_vector(key):
  """``flat``: init is the raveled tree (leaf order), apply and its gradient are the
  structured model's on the unraveled vector, under vmap too; mixed dtypes are refused."""
  pair = models.make_pair("dcgan", (28, 28, 1), width=8)
  fp = models.flat_pair(pair)
  assert fp.latent_dim == pair.latent_dim
  keys = jax.random.split(key, 2)
  g, gf = jax.vmap(pair.generator.init)(keys), jax.vmap(fp.generator.init)(keys)
  leaves = jax.tree.leaves(g)
  assert gf.shape == (2, sum(x[0].size for x in leaves))
  np.testing.assert_array_equal(gf, np.concatenate([x.reshape(2, -1) for x in leaves], 1))
  z = _normal((3, pair.latent_dim))
  # jitted, each side one program (run op by op, every op compiled alone: 12 of 15 s)
  many = lambda apply: jax.jit(jax.vmap(apply, (0, None)))
  x = many(pair.generator.apply)(g, z)
  np.testing.assert_array_equal(many(fp.generator.apply)(gf, z), x)
  d, df = pair.discriminator.init(keys[0]), fp.discriminator.init(keys[0])
  loss = lambda apply, p: jnp.sum(jnp.tanh(apply(p, x[0])))
  grads = jax.jit(jax.grad(lambda p: loss(pair.discriminator.apply, p)))(d)
  flat_grads = jax.jit(jax.grad(lambda p: loss(fp.discriminator.apply, p)))(df)
  np.testing.assert_allclose(
    flat_grads, np.concatenate([np.ravel(x) for x in jax.tree.leaves(grads)]), rtol=1e-6
  )
  mixed = models.Model(lambda k: {"w": jnp.zeros(2), "n": jnp.zeros(2, jnp.int32)}, None)
  with pytest.raises(ValueError, match="one dtype"):
    models.flat(mixed)


@pytest.mark.parametrize("norm", [None, "layer"])
def test_norm_free_models_treat_examples_independently(norm, key):
  pair = models.make_pair("dcgan", (32, 32, 3), width=4, norm=norm)
  g, d = _init(pair, key)
  z = _normal((4, 128))
  g_apply, d_apply = jax.jit(pair.generator.apply), jax.jit(pair.discriminator.apply)
  x = g_apply(g, z)
  np.testing.assert_allclose(g_apply(g, z[:1]), x[:1], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(d_apply(d, x[1:2]), d_apply(d, x)[1:2], rtol=1e-4, atol=1e-6)


def test_batch_stat_norm_matches_numpy(key):
  from flax import linen as nn

  class M(nn.Module):
    @nn.compact
    def __call__(self, x):
      return models.BatchStatNorm()(x)

  x = 3.0 + 2.0 * _normal((8, 5, 5, 3))
  params = {
    "BatchStatNorm_0": {"scale": jnp.array([1.0, 2.0, 0.5]), "bias": jnp.array([0.0, 1.0, -1.0])}
  }
  y = np.asarray(M().apply({"params": params}, x))
  xn = np.asarray(x, np.float64)
  mean, var = xn.mean(axis=(0, 1, 2)), xn.var(axis=(0, 1, 2))
  expect = (xn - mean) / np.sqrt(var + 1e-5) * np.array([1.0, 2.0, 0.5]) + np.array(
    [0.0, 1.0, -1.0]
  )
  np.testing.assert_allclose(y, expect, rtol=1e-4, atol=1e-4)


def _matrix_with_gap(m, n, top=3.0):
  rng = np.random.default_rng(1)
  q1, _ = np.linalg.qr(rng.normal(size=(m, m)))
  q2, _ = np.linalg.qr(rng.normal(size=(n, n)))
  s = np.concatenate([[top], np.linspace(1.5, 0.1, min(m, n) - 1)])
  return (q1[:, : s.size] * s) @ q2[:, : s.size].T


def test_spectral_norm_estimate_matches_svd_and_its_gradient(x64):
  w = jnp.asarray(_matrix_with_gap(40, 24))
  u, s, vt = np.linalg.svd(np.asarray(w))
  fn = jax.jit(jax.value_and_grad(lambda w: models.spectral_norm_estimate(w, 30)))
  sigma, grad = fn(w)
  np.testing.assert_allclose(sigma, s[0], rtol=1e-10)
  # d sigma_max / dW = u_1 v_1^T (Miyato et al.'s gradient, exact at convergence).
  np.testing.assert_allclose(grad, np.outer(u[:, 0], vt[0]), atol=1e-8)
  normalized = jax.jit(models.spectral_normalize, static_argnums=1)(w, 30)
  np.testing.assert_allclose(
    np.linalg.svd(np.asarray(normalized), compute_uv=False)[0], 1.0, rtol=1e-10
  )


@pytest.mark.parametrize("shape", [(784, 256), (4, 4, 64, 128)])
def test_spectral_normalize_at_random_init_is_close_to_one(shape):
  fan_in = int(np.prod(shape[:-1]))
  kernel = np.random.default_rng(2).normal(size=shape).astype(np.float32) / np.sqrt(fan_in)
  matrix = kernel.reshape(-1, shape[-1])
  top = np.linalg.svd(matrix, compute_uv=False)[0]
  estimate = float(jax.jit(models.spectral_norm_estimate)(matrix))
  # Power iteration never over-estimates; a few iterations get within 10% at a random init.
  assert 0.9 * top <= estimate <= top * (1 + 1e-5)
  normalize = jax.jit(models.spectral_normalize, static_argnums=1)
  normalized = np.asarray(normalize(kernel, 5)).reshape(-1, shape[-1])
  assert 1 - 1e-5 <= np.linalg.svd(normalized, compute_uv=False)[0] <= 1.1


def test_spectrally_normalised_mlp_discriminator_is_about_1_lipschitz(key):
  d_model = models.mlp_discriminator(
    (10,), hidden=(64, 64), spectral_norm=True, n_power_iterations=50
  )
  d = d_model.init(key)
  d = jax.tree.map(lambda p: 5.0 * p, d)  # scaling the weights must not change the Lipschitz bound
  x = jnp.asarray(np.random.default_rng(3).normal(size=(256, 10)), jnp.float32)

  @jax.jit
  def input_grad_norms(d, x):
    grads = jax.vmap(jax.grad(lambda x: d_model.apply(d, x[None])[0]))(x)
    plain_grads = jax.vmap(jax.grad(lambda x: plain.apply(d, x[None])[0]))(x)
    return jnp.linalg.norm(grads, axis=1), jnp.linalg.norm(plain_grads, axis=1)

  plain = models.mlp_discriminator((10,), hidden=(64, 64))
  norms, plain_norms = input_grad_norms(d, x)
  assert 0.1 < float(norms.max()) <= 1.05
  assert float(plain_norms.max()) > 5.0


def test_spectral_norm_changes_only_the_discriminator_output_not_its_params(key):
  plain = models.dcgan_discriminator((28, 28, 1), norm=None, width=4)
  sn = models.dcgan_discriminator((28, 28, 1), spectral_norm=True, width=4)
  p = plain.init(key)
  assert jax.tree.structure(p) == jax.tree.structure(sn.init(key))
  x = _normal((3, 28, 28, 1))
  assert not np.allclose(jax.jit(plain.apply)(p, x), jax.jit(sn.apply)(p, x))


def test_bad_arguments_raise():
  with pytest.raises(ValueError, match="image_shape"):
    models.dcgan_generator((64, 64, 3))
  with pytest.raises(ValueError, match="architecture"):
    models.make_pair("resnet", (28, 28, 1))
  with pytest.raises(ValueError, match="unknown keyword"):
    models.make_pair("mlp", (2,), width=3)
  with pytest.raises(ValueError, match="norm"):
    models.dcgan_discriminator(norm="group")
  with pytest.raises(ValueError, match="output_activation"):
    models.mlp_generator((2,), output_activation="relu6")
  with pytest.raises(ValueError, match="initializer must be one of .* got 'kaiming'"):
    models.make_pair("mlp", (2,), initializer="kaiming")


def test_torch_initializer_is_pytorchs_linear_default(key):
  """``initializer="torch"``: every kernel and bias ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``
  (PyTorch's ``nn.Linear`` default; closed form: variance ``1/(3 fan_in)``); the default
  ``"fan_in_uniform"`` keeps kernels ``U(-sqrt(3/fan_in), sqrt(3/fan_in))`` (variance
  ``1/fan_in``) and zero biases, its draws unchanged by the option's existence."""
  kw = dict(latent_dim=32, hidden=(256, 64))
  torch_pair = models.make_pair("mlp", (28, 28, 1), initializer="torch", **kw)
  default_pair = models.make_pair("mlp", (28, 28, 1), **kw)
  for pair, scheme in ((torch_pair, "torch"), (default_pair, "fan_in_uniform")):
    for params in _init(pair, key):
      for layer in params.values():
        w, b = np.asarray(layer["kernel"]), np.asarray(layer["bias"])
        fan_in = w.shape[0]
        bound = 1 / np.sqrt(fan_in) if scheme == "torch" else np.sqrt(3 / fan_in)
        assert np.abs(w).max() <= bound * (1 + 1e-6)
        np.testing.assert_allclose(w.var(), bound**2 / 3, rtol=0.25)
        if scheme == "torch":
          assert np.abs(b).max() <= bound * (1 + 1e-6) and b.all()  # drawn, not zero
          if b.size >= 64:
            np.testing.assert_allclose(b.var(), bound**2 / 3, rtol=0.5)
        else:
          assert not b.any()
  shapes = lambda p: jax.tree.map(jnp.shape, p)
  assert shapes(_init(torch_pair, key)) == shapes(_init(default_pair, key))
