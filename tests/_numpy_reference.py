"""Independent plain-numpy implementations of the game optimizers (test oracle).

Written from the update rules in the papers, sharing no code with minmaxlab.
"""

import numpy as np


class SGD:
  def __init__(self, lr):
    self.lr = lr

  def init(self, n):
    return None

  def step(self, g, s):
    return -self.lr * g, s


class Adam:
  def __init__(self, lr, b1=0.9, b2=0.999, eps=1e-8):
    self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps

  def init(self, n):
    return (np.zeros(n), np.zeros(n), 0)

  def step(self, g, s):
    m, v, t = s
    t += 1
    m = self.b1 * m + (1 - self.b1) * g
    v = self.b2 * v + (1 - self.b2) * g * g
    mhat = m / (1 - self.b1**t)
    vhat = v / (1 - self.b2**t)
    return -self.lr * mhat / (np.sqrt(vhat) + self.eps), (m, v, t)


class Bilinear:
  """f = x^T A y + b^T x + c^T y ; descent field (A y + b, -(A^T x + c))."""

  def __init__(self, A, b, c):
    self.A, self.b, self.c = (np.asarray(t, np.float64) for t in (A, b, c))

  def gx(self, x, y):
    return self.A @ y + self.b

  def gy(self, x, y):
    return -(self.A.T @ x + self.c)


def run(method, game, opt, x, y, steps, *, max_steps=1, la=None, shared=False):
  """Iterate ``method`` in {gda, alt, eg, ogda}; ``la=(k, alpha, lazy)`` wraps it in
  joint lookahead. Returns the list of iterates (x, y) after every step."""
  x, y = np.array(x, np.float64), np.array(y, np.float64)
  n, m = x.size, y.size
  sx, sy = opt.init(n), opt.init(m)
  ex, ey = opt.init(n), opt.init(m)  # extrapolation states (EG)
  prev = None
  slow = (x.copy(), y.copy())
  out = []
  for t in range(1, steps + 1):
    if method == "gda":
      gx, gy = game.gx(x, y), game.gy(x, y)
      ux, sx = opt.step(gx, sx)
      uy, sy = opt.step(gy, sy)
      x, y = x + ux, y + uy
    elif method == "alt":
      for _ in range(max_steps):
        uy, sy = opt.step(game.gy(x, y), sy)
        y = y + uy
      ux, sx = opt.step(game.gx(x, y), sx)
      x = x + ux
    elif method == "eg":
      gx, gy = game.gx(x, y), game.gy(x, y)
      if shared:
        ux, sx = opt.step(gx, sx)
        uy, sy = opt.step(gy, sy)
      else:
        ux, ex = opt.step(gx, ex)
        uy, ey = opt.step(gy, ey)
      xh, yh = x + ux, y + uy
      ux, sx = opt.step(game.gx(xh, yh), sx)
      uy, sy = opt.step(game.gy(xh, yh), sy)
      x, y = x + ux, y + uy
    elif method == "ogda":
      ux, sx = opt.step(game.gx(x, y), sx)
      uy, sy = opt.step(game.gy(x, y), sy)
      if prev is None:
        prev = (ux, uy)
      x, y = x + 2 * ux - prev[0], y + 2 * uy - prev[1]
      prev = (ux, uy)
    else:
      raise ValueError(method)
    if la is not None:
      k, alpha, lazy = la
      if t % k == 0:
        if lazy and t == k:
          slow = (x.copy(), y.copy())
        else:
          slow = (slow[0] + alpha * (x - slow[0]), slow[1] + alpha * (y - slow[1]))
        x, y = slow[0].copy(), slow[1].copy()
    out.append((x.copy(), y.copy()))
  return out
