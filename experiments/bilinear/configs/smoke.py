"""Seconds-long version of the bilinear comparison (CI)."""

from experiments.bilinear.configs import default


def get_config():
  c = default.get_config()
  c.dim = 8
  c.seeds = 2
  c.passes = 60
  return c
