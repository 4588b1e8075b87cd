"""experiments/benchmarks/dcgan_cpu.py: its command-line errors are one line, and the gap of
the two formulations' fields is measured per player relative to the native field (the timing
itself is the committed JSON's; the formulations' equality is tests/gan/test_gan_conv.py's)."""

import jax.numpy as jnp
import pytest

import minmaxlab as mml
from experiments.benchmarks import dcgan_cpu as bench


@pytest.mark.parametrize(
  "argv,message",
  [
    (["--seeds", "0"], "--seeds must be positive integers separated by commas, got '0'"),
    (["--seeds", "a"], "--seeds must be positive integers separated by commas, got 'a'"),
    (["--impls", "fast"], "--impls must name some of ('native', 'matmul'), got 'fast'"),
    (["--steps", "0"], "--steps and --repeats must be >= 1, got 0, 5"),
  ],
)
def test_a_bad_argument_is_one_line(argv, message):
  with pytest.raises(SystemExit) as e:
    bench.main(argv)
  assert str(e.value) == message


def test_field_gap_is_relative_per_player():
  native = mml.Players({"w": jnp.array([2.0, -4.0])}, {"w": jnp.array([1.0, 0.5])})
  matmul = mml.Players({"w": jnp.array([2.0, -3.0])}, {"w": jnp.array([1.0, 0.5])})
  assert bench.field_gap({"native": native, "matmul": matmul}) == {"min": 0.25, "max": 0.0}
