"""Run in the REFERENCE's interpreter (torch), inside a scratch copy of Lipizzaner's ``src/``
(``lipizzaner_ring_outcome.py`` copies it and starts every client and the master through this
file): Lipizzaner's own ``main.py`` with three run-time additions, so that the reference runs
the library's 8-Gaussian ring. Nothing of the reference's code is changed or copied.

- the data set ``ring8``: 8 Gaussians on a circle (radius and std from ``RING_*`` in the
  environment), ``batch_size * n_batches`` records drawn once from numpy's global generator (as
  the reference's own toy loaders draw theirs), served by the reference's ``DataLoader``
  (shuffled epochs); no images are saved;
- the networks ``ring_mlp``: the library ring's MLPs (latent ``RING_LATENT``, two hidden layers
  of ``RING_HIDDEN`` with LeakyReLU 0.2, a linear generator output; the discriminator ends in a
  sigmoid, as the reference's ``DiscriminatorNet`` with ``BCELoss`` expects);
- the score ``ring_tvd`` (lower is better): the library's ``mode_tvd_score`` of the samples of
  the reference's own ``MixedGeneratorDataset`` (each sample weighs 1/N; the dataset's
  ``exact_proportion`` sampling realises the weights), used by the clients' mixture ES and by
  the master's final evaluation. In the master, each node's final mixture (its samples, score,
  weights) is also written to ``$RING_EVAL_DIR/<node>.npz`` when the master scores it.

Usage: ``python lipizzaner_ring_entry.py SRC main.py-ARGS...``.
"""

from __future__ import annotations

import os
import runpy
import sys

NAME = "lipizzaner_ring_entry"  # the module name the reference's class_maps import


def ring_modes(np, n_modes: int, radius: float):
  """The modes in the library's order (``minmaxlab.gan.data``'s ring: angle 2 pi k / K)."""
  angles = 2 * np.pi * np.arange(n_modes) / n_modes
  return np.stack([radius * np.cos(angles), radius * np.sin(angles)], axis=1)


def tvd_score(np, x, modes, std: float, threshold: float = 3.0) -> float:
  """``minmaxlab.gan.metrics.mode_tvd_score`` of equally weighted samples ``x [N, 2]``."""
  d = np.linalg.norm(x[:, None, :] - modes[None], axis=-1)
  nearest, hq = d.argmin(1), d.min(1) <= threshold * std
  h = np.bincount(nearest[hq], minlength=len(modes)) / len(x)
  return float(0.5 * (np.abs(h - 1.0 / len(modes)).sum() + (1.0 - h.sum())))


def _env():
  e = os.environ
  return {
    "n_modes": int(e.get("RING_MODES", "8")),
    "radius": float(e.get("RING_RADIUS", "2.0")),
    "std": float(e.get("RING_STD", "0.02")),
    "latent": int(e.get("RING_LATENT", "16")),
    "hidden": int(e.get("RING_HIDDEN", "64")),
  }


def _data_classes(np, torch, ring):
  from data.data_loader import DataLoader

  class RingDataSet(torch.utils.data.Dataset):
    def __init__(self, n_records, **kwargs):
      modes = ring_modes(np, ring["n_modes"], ring["radius"])
      which = np.random.choice(len(modes), n_records)
      x = modes[which] + ring["std"] * np.random.randn(n_records, 2)
      self.data = torch.from_numpy(x).float()

    def __getitem__(self, index):
      return self.data[index], 0

    def __len__(self):
      return len(self.data)

  class RingDataLoader(DataLoader):
    def __init__(self, use_batch=True, batch_size=100, n_batches=0, shuffle=False):
      super().__init__(None, use_batch, batch_size, n_batches, shuffle)
      n_records = self.batch_size * max(int(self.n_batches), 1)
      self.dataset = lambda **kw: RingDataSet(n_records, **kw)

    @property
    def n_input_neurons(self):
      return 2

    def transform(self):
      return None

    def save_images(self, images, shape, filename):
      pass  # the reference's toy loaders plot every iteration; nothing is looked at here

  return RingDataLoader


def _network_class(torch, ring):
  from networks.competetive_net import DiscriminatorNet, GeneratorNet
  from networks.network_factory import NetworkFactory

  nn, L, H = torch.nn, ring["latent"], ring["hidden"]

  class RingMLPFactory(NetworkFactory):
    @property
    def gen_input_size(self):
      return L

    def create_generator(self, parameters=None, encoded_parameters=None):
      seq = nn.Sequential(
        nn.Linear(L, H), nn.LeakyReLU(0.2), nn.Linear(H, H), nn.LeakyReLU(0.2), nn.Linear(H, 2)
      )
      return self._finish(GeneratorNet(self.loss_function, seq, L), parameters, encoded_parameters)

    def create_discriminator(self, parameters=None, encoded_parameters=None):
      seq = nn.Sequential(
        nn.Linear(2, H),
        nn.LeakyReLU(0.2),
        nn.Linear(H, H),
        nn.LeakyReLU(0.2),
        nn.Linear(H, 1),
        nn.Sigmoid(),
      )
      net = DiscriminatorNet(self.loss_function, seq, L)
      return self._finish(net, parameters, encoded_parameters)

    @staticmethod
    def _finish(net, parameters, encoded_parameters):
      if parameters is not None:
        net.parameters = parameters
      if encoded_parameters is not None:
        net.encoded_parameters = encoded_parameters
      return net

  return RingMLPFactory


class _Current:
  node = None  # the master's node being evaluated (set by get_and_create_output_dir)
  weights = None


def _score_class(np, torch, ring):
  modes = ring_modes(np, ring["n_modes"], ring["radius"])

  class RingScore:
    is_reversed = True  # lower is better, as FID

    def calculate(self, dataset):
      with torch.no_grad():
        x = torch.stack([dataset[i] for i in range(len(dataset))]).numpy().reshape(-1, 2)
      value = tvd_score(np, x, modes, ring["std"])
      out = os.environ.get("RING_EVAL_DIR")
      if out and _Current.node is not None:  # the master's final evaluation
        node = "{}-{}".format(_Current.node["address"], _Current.node["port"])
        sources = [i.source for i in dataset.individuals]
        np.savez(
          os.path.join(out, node + ".npz"),
          samples=x.astype(np.float32),
          score=value,
          sources=np.array(sources),
          weights=np.array([float(_Current.weights.get(s, 0.0)) for s in sources]),
          gen_indices=np.asarray(dataset.gen_indices),
        )
      return value, None

  return RingScore


def install() -> None:
  """Register ``ring8``, ``ring_mlp`` and the score type ``ring_tvd`` in the reference."""
  import numpy as np
  import torch

  torch.set_num_threads(1)
  ring = _env()
  from helpers.configuration_container import ConfigurationContainer
  from training.mixture import score_factory

  me = sys.modules[NAME]
  me.RingDataLoader = _data_classes(np, torch, ring)
  me.RingMLPFactory = _network_class(torch, ring)
  me.RingScore = _score_class(np, torch, ring)
  maps = ConfigurationContainer._decorated.class_maps  # the class under @Singleton
  maps["ring8"] = (NAME, "RingDataLoader")
  maps["ring_mlp"] = (NAME, "RingMLPFactory")
  original = score_factory.ScoreCalculatorFactory.create

  def create():
    settings = ConfigurationContainer.instance().settings["trainer"]["params"]
    if settings.get("score", {}).get("type") == "ring_tvd":
      return me.RingScore()
    return original()

  score_factory.ScoreCalculatorFactory.create = staticmethod(create)
  _watch_master()


def _watch_master() -> None:
  """Tell the score which node the master evaluates (and with which mixture weights)."""
  import lipizzaner_master as lm

  node_dir = lm.LipizzanerMaster.get_and_create_output_dir
  mixed = lm.MixedGeneratorDataset

  def get_and_create_output_dir(self, node):
    _Current.node = node
    return node_dir(self, node)

  class Mixed(mixed):
    def __init__(self, generators, weights, *a, **k):
      _Current.weights = dict(weights)
      super().__init__(generators, weights, *a, **k)

  lm.LipizzanerMaster.get_and_create_output_dir = get_and_create_output_dir
  lm.MixedGeneratorDataset = Mixed


def main(argv) -> None:
  src, rest = argv[0], argv[1:]
  sys.path.insert(0, src)
  os.chdir(src)
  sys.modules.setdefault(NAME, sys.modules[__name__])  # runpy replaces __main__
  sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
  from lipizzaner_driver import _stub_modules

  _stub_modules()  # losswise (imported by main.py, disabled in the config), MongoDB
  install()
  sys.argv = ["main.py", *rest]
  runpy.run_path(os.path.join(src, "main.py"), run_name="__main__")


if __name__ == "__main__":
  main(sys.argv[1:])
