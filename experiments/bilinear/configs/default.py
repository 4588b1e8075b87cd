"""The paper's full-batch bilinear experiment (Chavdarova et al. 2021, Sec. 5.1).

f(x, y) = x^T A y + b^T x + c^T y with d = 100, A = I, b, c ~ N(0, I/d);
every method with and without joint lookahead, several seeds.
"""

import ml_collections


def get_config():
  c = ml_collections.ConfigDict()
  c.dim = 100
  c.seeds = 5
  c.seed = 0
  c.passes = 800  # budget of field evaluations per method (EG = 2 per step)
  c.sgd_step_size = 0.3  # the paper's eta for GDA / AltGDA / EG / OGDA
  c.adam_step_size = 0.05
  c.adam_b1 = 0.0
  c.sync_period = 6  # the paper's k for LA-GDA / LA-EG
  c.slow_step_size = 0.5
  c.methods = "gda,alternating,extragradient,optimistic,adam,extra_adam"
  return c
