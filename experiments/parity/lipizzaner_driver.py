"""Run in the REFERENCE's interpreter (torch), inside a scratch copy of Lipizzaner's ``src/``
(``lipizzaner_golden.py`` copies it and starts this file): one cell's generation of
Lipizzaner's own ``LipizzanerGANTrainer.train`` on a small 2-D problem, with every random draw
of the reference recorded by run-time wrappers (nothing of the reference's code is changed or
copied). Writes a JSON file of plain lists; ``lipizzaner_golden.py`` turns it into the golden
``.npz``.

What is stubbed, and why (none of it is on the path the golden file checks):
- the HTTP neighbour pulls (``NodeClient``): a stub hands back copies of the other cells'
  individuals, as the real pull decodes copies (weights, Adam state, learning rate);
- the data loader: a ``torch`` ``DataLoader`` over the case's fixed real samples, no shuffle;
- the score (FID): the mean distance of the mixture's samples to the nearest of the case's
  modes, computed from the reference's own ``MixedGeneratorDataset``;
- ``log_results`` (image files), MongoDB and ``requests`` (modules the import chain needs).

The topology (``Neighbourhood._adjacent_cells``, ``_init_mixture_weights``) and every operator
(fitness, tournament, ``update_genomes`` with its ``load_state_dict``, mutation, replacement,
mixture ES) are the reference's own code.

Usage (by ``lipizzaner_golden.py``): ``python lipizzaner_driver.py SRC CASE.json OUT.json``.
"""

from __future__ import annotations

import json
import os
import sys
import types


def _stub_modules() -> None:
  """Modules the reference imports but this run never calls (HTTP, MongoDB)."""
  for name in ("requests", "bson", "pymongo", "pymongo.errors", "losswise"):
    if name not in sys.modules:
      try:
        __import__(name)
      except ImportError:
        sys.modules[name] = types.ModuleType(name)
  stubs = {
    "requests": {"get": None, "post": None},
    "bson": {"ObjectId": lambda x=None: x, "Binary": bytes},
    "pymongo": {"MongoClient": None},
    "pymongo.errors": {"ServerSelectionTimeoutError": Exception},
  }
  for name, attrs in stubs.items():
    for attr, value in attrs.items():
      if not hasattr(sys.modules[name], attr):
        setattr(sys.modules[name], attr, value)


class Recorder:
  """The event log: every draw of the reference, tagged with the phase it belongs to."""

  def __init__(self):
    self.phase = "init"
    self.events = []

  def log(self, kind, value):
    self.events.append({"phase": self.phase, "kind": kind, "value": value})


def _settings(case: dict) -> dict:
  n = case["dim"] ** 2
  nodes = [{"address": "127.0.0.1", "port": 5000 + i} for i in range(n)]
  params = {
    "population_size": case["population_size"],
    "tournament_size": case["tournament_size"],
    "n_replacements": case["n_replacements"],
    "default_adam_learning_rate": case["learning_rate"],
    "alpha": case["alpha"],
    "mutation_probability": case["mutation_probability"],
    "discriminator_skip_each_nth_step": case["discriminator_skip_each_nth_step"],
    "enable_selection": case["selection"],
    "mixture_sigma": case["mixture_sigma"],
    # the shipped files write score_sample_size; the trainer reads sample_size
    "score": {"enabled": True, "type": "stub", "score_sample_size": 7, "cuda": False},
    "fitness": {
      "fitness_sample_size": case["fitness_samples"],
      "fitness_mode": case["fitness_mode"],
    },
  }
  return {
    "trainer": {
      "name": "lipizzaner_gan",
      "n_iterations": 1,
      "params": params,
      "mixture_generator_samples_mode": "exact_proportion",
    },
    "dataloader": {"dataset_name": "stub2d", "use_batch": True, "batch_size": case["batch_size"]},
    "network": {"name": "stub", "loss": "bceloss"},
    "general": {
      "logging": {"enabled": False, "image_format": "png"},
      "distribution": {"client_nodes": nodes},
      "checkpoint_period": 0,
      "seed": case["seed"],
    },
  }


def _nets(case, torch, competetive_net, loss):
  L, H = case["latent_dim"], case["hidden"]
  nn = torch.nn
  g = nn.Sequential(nn.Linear(L, H), nn.LeakyReLU(0.2), nn.Linear(H, 2))
  d = nn.Sequential(nn.Linear(2, H), nn.LeakyReLU(0.2), nn.Linear(H, 1), nn.Sigmoid())
  return competetive_net.GeneratorNet(loss, g, L), competetive_net.DiscriminatorNet(loss, d, L)


def _weights(net) -> list:
  """[W0, b0, W1, b1] of a Sequential's Linear layers (torch layout: W is [out, in])."""
  return [p.detach().numpy().astype(float).tolist() for p in net.net.parameters()]


def _grid(case, torch, individual, competetive_net):
  """Every cell's individuals (torch's default init from the case's init seed)."""
  torch.manual_seed(case["init_seed"])
  loss = torch.nn.BCELoss()  # one loss object, as the reference's network factory shares it
  cells = []
  for c in range(case["dim"] ** 2):
    gens, dis = [], []
    for i in range(case["population_size"]):
      g, d = _nets(case, torch, competetive_net, loss)
      gens.append(individual.Individual(g, g.default_fitness, id=f"{c}/G{i}"))
      dis.append(individual.Individual(d, d.default_fitness, id=f"{c}/D{i}"))
      for ind in (gens[-1], dis[-1]):
        ind.learning_rate = case["learning_rate"]
        ind.source = f"127.0.0.1:{5000 + c}"
    cells.append((gens, dis))
  return cells, loss


class _NodeClient:
  """The neighbours' individuals as the HTTP pull would return them: decoded copies."""

  def __init__(self, cells):
    self.cells = cells

  def _copies(self, nodes, side):
    return [ind.clone() for n in nodes for ind in self.cells[int(n["port"]) - 5000][side]]

  def get_all_generators(self, nodes):
    return self._copies(nodes, 0)

  def get_all_discriminators(self, nodes):
    return self._copies(nodes, 1)

  def get_best_generators(self, nodes):
    best = lambda n: sorted(self.cells[int(n["port"]) - 5000][0], key=lambda x: x.fitness)[0]
    return [best(n).clone() for n in nodes]


def _neighbourhood(case, cells, neighbourhood_mod, concurrent, client_env):
  cls = neighbourhood_mod.Neighbourhood._decorated
  nb = cls.__new__(cls)
  from helpers.configuration_container import ConfigurationContainer

  nb.cc = ConfigurationContainer.instance()
  nb.concurrent_populations = concurrent.ConcurrentPopulations.instance()
  nb.node_client = _NodeClient(cells)
  client_env.ClientEnvironment.port = 5000 + case["cell"]
  nb.grid_size, nb.grid_position, nb.local_node = nb._load_topology_details()
  nb.cell_number = nb._load_cell_number()
  nb.neighbours = nb._adjacent_cells()
  nb.all_nodes = nb.neighbours + [nb.local_node]
  nb.mixture_weights_generators = nb._init_mixture_weights()
  nb.mixture_weights_discriminators = None
  neighbourhood_mod.Neighbourhood._instance = nb
  return nb


def _wrap_draws(rec, np, random, torch, modules):
  """Record every draw: torch noise, random.choice/sample (as indices), numpy normal/rand."""
  from helpers import pytorch_helpers

  original_noise = pytorch_helpers.noise

  def noise(batch_size, data_size):
    z = original_noise(batch_size, data_size)
    rec.log("noise", z.numpy().astype(float).tolist())
    return z

  for m in modules:
    if hasattr(m, "noise"):
      m.noise = noise
  choice, sample = random.choice, random.sample

  def rec_choice(seq):
    x = choice(seq)
    rec.log("choice", [i for i, s in enumerate(seq) if s is x][0])
    return x

  def rec_sample(seq, k):
    xs = sample(seq, k)
    rec.log("sample", [[i for i, s in enumerate(seq) if s is x][0] for x in xs])
    return xs

  random.choice, random.sample = rec_choice, rec_sample
  normal, rand = np.random.normal, np.random.rand

  def rec_normal(*a, **k):
    x = normal(*a, **k)
    rec.log("normal", np.asarray(x, float).tolist())
    return x

  def rec_rand(*a):
    x = rand(*a)
    rec.log("rand", np.asarray(x, float).tolist())
    return x

  np.random.normal, np.random.rand = rec_normal, rec_rand


def _population_record(pop):
  return [
    {
      "id": ind.id,
      "fitness": float(ind.fitness),
      "learning_rate": float(ind.learning_rate),
      "adam_lr": None
      if ind.optimizer_state is None
      else float(ind.optimizer_state["param_groups"][0]["lr"]),
      "weights": _weights(ind.genome),
    }
    for ind in pop.individuals
  ]


def _wrap_trainer(rec, trainer_cls, population_cls):
  """Record the phases' outcomes around the reference's own methods."""
  evaluate, tournament, update = (
    trainer_cls.evaluate_fitness,
    trainer_cls.tournament_selection,
    trainer_cls.update_genomes,
  )
  replacement, mixture = population_cls.replacement, trainer_cls.mutate_mixture_weights_with_score

  def rec_evaluate(att, dfn, input_var, mode):
    evaluate(att, dfn, input_var, mode)
    rec.log(
      "fitness",
      {
        "attackers": [i.id for i in att.individuals],
        "defenders": [i.id for i in dfn.individuals],
        "values": [float(i.fitness) for i in att.individuals],
      },
    )

  def rec_tournament(self, population, population_type, is_logging=False):
    rec.log("tournament_pool", [i.id for i in population.individuals])
    new = tournament(self, population, population_type, is_logging)
    rec.log("winners", [i.id for i in new.individuals])
    return new

  def rec_update(self, att, dfn, input_var, loaded, data_iterator):
    rec.log(
      "update",
      {
        "attackers": [i.id for i in att.individuals],
        "defenders": [i.id for i in dfn.individuals],
        "real": input_var.numpy().astype(float).tolist(),
      },
    )
    out = update(self, att, dfn, input_var, loaded, data_iterator)
    rec.log("updated", _population_record(att))
    return out

  def rec_replacement(self, new_population, n_replacements=1, is_logging=False):
    rec.log(
      "replacement_in",
      {"local": _population_record(self), "new": _population_record(new_population)},
    )
    replacement(self, new_population, n_replacements, is_logging)
    rec.log("replacement_out", [i.id for i in self.individuals])

  def rec_mixture(self, input_data):
    before = list(self.neighbourhood.mixture_weights_generators.items())
    mixture(self, input_data)
    after = list(self.neighbourhood.mixture_weights_generators.items())
    rec.log("mixture", {"before": before, "after": after, "score": float(self.score)})

  import training.ea.lipizzaner_gan_trainer as lgt

  class RecMixedGeneratorDataset(lgt.MixedGeneratorDataset):
    def __init__(self, generators, weights, *a, **k):
      rec.log("mixture_weights", list(weights.values()))
      super().__init__(generators, weights, *a, **k)

  lgt.MixedGeneratorDataset = RecMixedGeneratorDataset
  trainer_cls.evaluate_fitness = staticmethod(rec_evaluate)
  trainer_cls.tournament_selection = rec_tournament
  trainer_cls.update_genomes = rec_update
  population_cls.replacement = rec_replacement
  trainer_cls.mutate_mixture_weights_with_score = rec_mixture
  trainer_cls.log_results = lambda self, *a, **k: (None, None)


class _Score:
  """The stub score (lower is better): mean distance of the mixture's samples to the nearest
  mode, over the reference's own ``MixedGeneratorDataset`` (its noise and its sample count)."""

  is_reversed = True

  def __init__(self, modes, rec, torch):
    self.modes, self.rec, self.torch = modes, rec, torch

  def calculate(self, dataset):
    with self.torch.no_grad():
      x = self.torch.stack([dataset[i] for i in range(len(dataset))])
    dist = self.torch.cdist(x.reshape(-1, 2), self.modes).min(dim=1).values
    value = float(dist.mean())
    self.rec.log("score", {"value": value, "n_samples": len(dataset)})
    return value, None


class _Loader:
  """The data loader the trainer asks for: fixed real samples in order (no shuffle)."""

  def __init__(self, case, torch):
    self.torch = torch
    self.real = torch.tensor(case["real"], dtype=torch.float32)
    self.batch_size = case["batch_size"]
    self.n_batches = case["n_batches"]

  def load(self):
    data = self.torch.utils.data.TensorDataset(self.real, self.torch.zeros(len(self.real)))
    return self.torch.utils.data.DataLoader(data, batch_size=self.batch_size, shuffle=False)

  @staticmethod
  def transpose_data(x):
    return x


class _Factory:
  """``initialize_populations`` asks the factory for the cell's pairs: the prebuilt ones."""

  def __init__(self, pairs, latent_dim):
    self.pairs, self.gen_input_size = list(pairs), latent_dim

  def create_both(self):
    return self.pairs.pop(0)


def run(case: dict) -> dict:
  import random

  import numpy as np
  import torch

  torch.set_num_threads(1)
  from distribution import client_environment, concurrent_populations, neighbourhood
  from helpers import individual, population, reproducible_helpers
  from helpers.configuration_container import ConfigurationContainer
  from networks import competetive_net
  from training.ea import lipizzaner_gan_trainer as lgt
  from training.mixture import mixed_generator_dataset, score_factory

  rec = Recorder()
  ConfigurationContainer.instance().settings = _settings(case)
  cells, _ = _grid(case, torch, individual, competetive_net)
  initial = [
    [_population_record(population.Population(side, 0)) for side in cell] for cell in cells
  ]
  nb = _neighbourhood(case, cells, neighbourhood, concurrent_populations, client_environment)
  modes = torch.tensor(case["modes"], dtype=torch.float32)
  score_factory.ScoreCalculatorFactory.create = staticmethod(lambda: _Score(modes, rec, torch))
  _wrap_draws(rec, np, random, torch, (competetive_net, lgt, mixed_generator_dataset))
  _wrap_trainer(rec, lgt.LipizzanerGANTrainer, population.Population)
  own = cells[case["cell"]]
  factory = _Factory(zip(*(tuple(i.genome for i in side) for side in own)), case["latent_dim"])
  concurrent_populations.ConcurrentPopulations.instance().lock()  # the trainer unlocks it
  trainer = lgt.LipizzanerGANTrainer(_Loader(case, torch), factory)
  # the local individuals ARE the cell's: the neighbours' stub serves the same objects' copies
  for side, pop in zip(own, (trainer.population_gen, trainer.population_dis)):
    for ind, mine in zip(pop.individuals, side):
      ind.id, ind.source, ind.learning_rate = mine.id, mine.source, mine.learning_rate
  # every client runs this seed (get_heuristic_seed returns it unchanged: its sum is discarded)
  seed = reproducible_helpers.get_heuristic_seed(case["seed"], "127.0.0.1", 5000 + case["cell"])
  reproducible_helpers.set_random_seed(seed, False)
  rec.phase = "generation"
  trainer.train(1)
  return {
    "case": case,
    "initial": initial,
    "neighbours": [int(n["port"]) - 5000 for n in nb.neighbours],
    "all_nodes": [int(n["port"]) - 5000 for n in nb.all_nodes],
    "seed_used": seed,
    "score_sample_size": trainer.score_sample_size,
    "events": rec.events,
    "final_local": [
      _population_record(trainer.population_gen),
      _population_record(trainer.population_dis),
    ],
    "mixture_weights": list(nb.mixture_weights_generators.values()),
  }


def topology(dims) -> dict:
  """Every cell's neighbour list from the reference's ``_adjacent_cells`` (cell ids), and the
  seed ``get_heuristic_seed`` gives every client of a 3x3 grid."""
  from distribution import client_environment, concurrent_populations, neighbourhood
  from helpers import reproducible_helpers
  from helpers.configuration_container import ConfigurationContainer

  out = {}
  for dim in dims:
    case = {
      "dim": dim,
      "population_size": 1,
      "tournament_size": 2,
      "n_replacements": 1,
      "learning_rate": 2e-4,
      "alpha": 1e-4,
      "mutation_probability": 0.5,
      "discriminator_skip_each_nth_step": 0,
      "selection": True,
      "mixture_sigma": 0.01,
      "fitness_samples": 8,
      "fitness_mode": "average",
      "batch_size": 4,
      "seed": 1,
    }
    ConfigurationContainer.instance().settings = _settings(case)
    lists = []
    for cell in range(dim * dim):
      nb = _neighbourhood(
        dict(case, cell=cell), [], neighbourhood, concurrent_populations, client_environment
      )
      lists.append([int(n["port"]) - 5000 for n in nb.neighbours])
    out[str(dim)] = lists
  seeds = [reproducible_helpers.get_heuristic_seed(1, "127.0.0.1", 5000 + c) for c in range(9)]
  return {"neighbours": out, "heuristic_seeds": seeds}


def main(argv) -> int:
  src, case_path, out_path = argv
  sys.path.insert(0, src)
  os.chdir(src)
  _stub_modules()
  with open(case_path) as f:
    case = json.load(f)
  result = topology(case["dims"]) if case.get("kind") == "topology" else run(case)
  with open(out_path, "w") as f:
    json.dump(result, f)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
