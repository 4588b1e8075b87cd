r"""Lipizzaner's YAML configurations as ``experiments.coevolution`` configs.

  python -m experiments.coevolution.lipizzaner_config mnist-2x2.yml            # print the config
  python -m experiments.coevolution.main --config experiments/coevolution/configs/lipizzaner.py \
      --config.lipizzaner_yaml=mnist-2x2.yml --workdir runs/lip_2x2             # and run it

:func:`read` maps every field of the reference's ``neurips2018/mnist/mnist-*.yml`` and of
its 2-D quickstart ``toy-circular.yml`` (with their ``general`` files: ``general:
!include ../general-2x2.yml``, and ``!ENV ${VAR}``) onto a config of
``configs/base.py``; :data:`FIELDS` is the table of what maps where, each a ``same``
setting or a named ``variant`` (the README's parity table is generated from it). A field
not in the table, or a value the library cannot run (another trainer, score or network),
is refused with one line that names it (:class:`UnsupportedField`). A field the file omits
takes the value the reference's trainer would use (:data:`TRAINER_DEFAULTS`). The
reference's files are not shipped: the tests write YAML with its field names.

The grid comes from ``general.distribution.client_nodes``: Lipizzaner starts one client
per port (``port: 5000-5003`` is four), and its grid is the square of that many cells.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path


class UnsupportedField(ValueError):
  """A Lipizzaner field or value this reader does not map (the message names it)."""


def _d_every(skip):
  # Lipizzaner trains the discriminator on batches with batch % (skip + 1) == 0
  return int(skip) + 1


def _choice(table: dict):
  def pick(value, field):
    if value not in table:
      raise UnsupportedField(f"{field}: {value!r} is not supported (supported: {sorted(table)})")
    return table[value]

  return pick


def _require(expected):
  def check(value, field):
    if value != expected:
      raise UnsupportedField(f"{field}: only {expected!r} is supported, got {value!r}")
    return None

  return check


NETWORKS = {
  # G latent -> hidden -> data, D data -> hidden -> 1 (research/lipizzaner.md section 5)
  "four_layer_perceptron": {"architecture": "mlp", "latent_dim": 64, "hidden": (256, 256)},
  "circular_problem_perceptron": {"architecture": "mlp", "latent_dim": 256, "hidden": (128, 128)},
  # experiments/parity/lipizzaner_ring_entry.py adds it to the reference at run time: the
  # library ring's MLPs (its RING_LATENT and RING_HIDDEN defaults)
  "ring_mlp": {"architecture": "mlp", "latent_dim": 16, "hidden": (64, 64)},
}
DATASETS = {
  "mnist": "tfds:mnist",
  "fashion_mnist": "fashion_mnist",
  "gaussian_circle": "ring8",
  "ring8": "ring8",  # lipizzaner_ring_entry.py's: batch_size * n_batches records of the ring
}
SCORES = ("fid", "gaussian_toy_distances", "ring_tvd")  # ring_tvd: lipizzaner_ring_entry.py's
# read(coupling="reference"): the reference's training phase and the behaviours of its code
# that the library names (CoevolutionConfig's docstring; tests/parity/ checks each against
# the reference's own output): one opponent drawn per batch and side, the discriminator's
# phase, _adjacent_cells' transposed neighbourhoods, get_heuristic_seed's one seed for every
# client; its networks' start, PyTorch's nn.Linear default (initializer "torch"); its
# rescoring against the trained local individuals (rescore_own) and its mixture ES on the
# neighbours' generators after their training (mixture_generators).
# Opponents: with selection the selected individuals, else the neighbourhood's.
REFERENCE_COUPLING = {
  "initializer": "torch",
  "schedule": "reference",
  "d_phase": "first",
  "neighbourhood_layout": "transposed",
  "cell_seeds": "shared",
  "generator_selection": "tournament",
  "rescore_own": "trained",
  "mixture_generators": "trained",
}
LOSSES = {"bceloss": "ns_bce", "mseloss": "lsgan", "heuristicloss": "heuristic"}
FITNESS_MODES = {"average": "average", "best": "best", "worse": "worst"}
SAMPLES_MODES = {"exact_proportion": "exact_proportion", "independent_probability": "independent"}

# field -> (our field, how, note). how: "same" (the same setting), "variant" (a named
# difference, the note says which), "checked" (the reader requires the reference's value),
# "ignored" (no effect on the computation: logging, addresses, devices).
_S, _V, _C, _I = "same", "variant", "checked", "ignored"
FIELDS: dict[str, tuple[str, str, str]] = {
  "trainer.name": ("loss", _C, "lipizzaner_gan only (the GAN trainer; the WGAN one: loss=wgan)"),
  "trainer.n_iterations": ("generations", _S, ""),
  "trainer.calculate_net_weights_dist": (
    "metrics net_weights_dist/g, /d",
    _S,
    "always logged, every generation",
  ),
  "trainer.mixture_generator_samples_mode": ("mixture_sampling", _S, ""),
  "trainer.params.population_size": ("population_size", _S, ""),
  "trainer.params.tournament_size": (
    "tournament_size",
    _S,
    "with tournament_sampling=without_replacement (random.sample)",
  ),
  "trainer.params.n_replacements": ("n_replacements", _S, ""),
  "trainer.params.default_adam_learning_rate": ("learning_rate", _S, "Adam (0.5, 0.999)"),
  "trainer.params.alpha": (
    "mutation_scale, with lr_mutation = reference_as_run",
    _S,
    "alpha of the reference's mutation before every update of a player, with probability p: "
    "lr <- max(0, lr + alpha N(-lr0/10, lr0)), lr0 = default_adam_learning_rate "
    "(tests/coevolution/test_lr_mutation.py: a hand-written loop over two generations)",
  ),
  "trainer.params.mutation_probability": (
    "mutation_probability, with lr_mutation = reference_as_run",
    _S,
    "p of that mutation. The update then builds Adam(lr=mutated) and calls load_state_dict(saved), "
    "which restores the saved param group's lr (PyTorch's state_dict holds each group's lr), so "
    "an individual's updates all use the learning rate of its first update; reference_as_run "
    "does the same (the tracked value still mutates and is logged, as the reference's); "
    "lr_mutation = reference is the rule as written (the mutated value used), per_generation "
    "this library's own (tests/coevolution/test_lr_mutation.py, all three)",
  ),
  "trainer.params.discriminator_skip_each_nth_step": (
    "d_every",
    _V,
    "d_every = skip + 1: the same number of discriminator steps per epoch, one batch later "
    "(the reference's discriminator steps on batches 0, k, 2k, ... of an epoch, "
    "batch_number % (skip + 1) == 0; minmaxlab's on batches k - 1, 2k - 1, ...)",
  ),
  "trainer.params.mixture_sigma": ("mixture_sigma", _S, ""),
  "trainer.params.enable_selection": (
    "selection",
    _S,
    "off: opponents from the neighbourhood, no replacement test",
  ),
  "trainer.params.score.enabled": ("(the mixture ES)", _C, "True only"),
  "trainer.params.score.type": (
    "score",
    _V,
    "fid: the project's classifier-FID (not Inception); gaussian_toy_distances: mode TVD",
  ),
  "trainer.params.score.score_sample_size": (
    "mixture_samples",
    _V,
    "per generator: ceil(size / distinct neighbourhood members: 5, 3 on 2x2), exact counts. "
    "The reference's trainer "
    "reads score.sample_size (absent from its files: 10000) for the mixture's samples, an "
    "exact-proportion assignment shuffled, and its FID scores the first score_sample_size of "
    "them: proportional in expectation, not exactly",
  ),
  "trainer.params.score.cuda": ("(device)", _I, ""),
  "trainer.params.fitness.fitness_sample_size": (
    "fitness_samples",
    _S,
    "with fitness_noise=fresh: every evaluation draws its own noise, as the reference",
  ),
  "trainer.params.fitness.fitness_mode": ("fitness_mode", _S, "worse -> worst"),
  "dataloader.dataset_name": (
    "dataset",
    _V,
    "mnist -> tfds:mnist (needs tensorflow-datasets and its files); gaussian_circle -> ring8",
  ),
  "dataloader.use_batch": ("(minibatches)", _C, "True only"),
  "dataloader.batch_size": ("batch_size", _S, ""),
  "dataloader.n_batches": (
    "steps_per_generation",
    _S,
    "0: one epoch (60000 / batch for MNIST, records / batch for 2-D)",
  ),
  "dataloader.shuffle": ("(fresh minibatches)", _V, "batches drawn with replacement"),
  "dataloader.number_of_modes": ("dataset ring8", _C, "8 only"),
  "dataloader.number_of_records": ("dataset_size", _S, ""),
  "network.name": ("architecture, latent_dim, hidden", _V, "LeakyReLU hidden layers"),
  "network.loss": ("loss", _S, "bceloss -> ns_bce, mseloss -> lsgan"),
  "master.calculate_score": ("(evaluation)", _S, ""),
  "master.score_sample_size": ("num_eval_samples", _S, ""),
  "master.cuda": ("(device)", _I, ""),
  "general.distribution.client_nodes": ("rows, cols", _S, "sqrt(number of client ports) square"),
  "general.seed": ("seed", _V, "JAX keys, not torch's generator"),
  "general.*": ("(logging, addresses, output)", _I, "logging, losswise, output_dir, ..."),
}
# What the reference's trainer uses where its file omits a field: the keyword defaults of
# LipizzanerGANTrainer.__init__ and EvolutionaryAlgorithmTrainer.__init__ (commit f411cb5; the
# factory passes only the data loader and the network factory, so these apply as written).
TRAINER_DEFAULTS = {
  "trainer.params.population_size": 10,
  "trainer.params.tournament_size": 2,
  "trainer.params.n_replacements": 1,
  "trainer.params.default_adam_learning_rate": 0.001,
  "trainer.params.alpha": 0.25,
  "trainer.params.mutation_probability": 0.9,
  "trainer.params.discriminator_skip_each_nth_step": 0,
  "trainer.params.mixture_sigma": 0.01,
  "trainer.params.enable_selection": True,
  "trainer.params.fitness.fitness_sample_size": 10000,
  "trainer.params.score.score_sample_size": 10000,
}
_IGNORED_PREFIXES = (
  "general.logging",
  "general.losswise",
  "general.output_dir",
  "general.num_workers",
  "general.name",
  "general.distribution.auto_discover",
  "general.distribution.master_node",
)


def _loader(base: Path):
  import yaml

  class Loader(yaml.SafeLoader):
    pass

  def include(loader, node):
    path = base / loader.construct_scalar(node)
    return yaml.load(path.read_text(), _loader(path.parent))

  def env(loader, node):
    value = loader.construct_scalar(node)
    return re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), value)

  Loader.add_constructor("!include", include)
  Loader.add_constructor("!ENV", env)
  return Loader


def _flatten(tree: dict, prefix: str = "") -> dict:
  out = {}
  for k, v in tree.items():
    name = f"{prefix}{k}"
    if isinstance(v, dict) and name not in ("general.distribution.master_node",):
      out.update(_flatten(v, f"{name}."))
    else:
      out[name] = v
  return out


def _clients(nodes) -> int:
  total = 0
  for node in nodes or ():
    port = str(node.get("port", ""))
    lo, _, hi = port.partition("-")
    total += (int(hi) - int(lo) + 1) if hi else 1
  return total


_PLAIN_FIELDS = {  # copied as they are
  "trainer.n_iterations": "generations",
  "trainer.params.population_size": "population_size",
  "trainer.params.tournament_size": "tournament_size",
  "trainer.params.n_replacements": "n_replacements",
  "trainer.params.default_adam_learning_rate": "learning_rate",
  "trainer.params.alpha": "mutation_scale",
  "trainer.params.mutation_probability": "mutation_probability",
  "trainer.params.mixture_sigma": "mixture_sigma",
  "trainer.params.enable_selection": "selection",
  "trainer.params.fitness.fitness_sample_size": "fitness_samples",
  "dataloader.batch_size": "batch_size",
  "master.score_sample_size": "num_eval_samples",
  "general.seed": "seed",
}


def _require_fitness_section(flat: dict) -> None:
  # the reference's trainer raises KeyError without a fitness section, and its default
  # fitness_mode ("worst") is not one it accepts (NotImplementedError)
  if "trainer.params.fitness.fitness_mode" not in flat:
    raise UnsupportedField(
      "trainer.params.fitness.fitness_mode: required (the reference's trainer refuses a file "
      "without it)"
    )


def _members(clients: int | None) -> int:
  """Distinct cells of a von Neumann neighbourhood on the square torus of ``clients`` cells
  (the cell and its 4 neighbours: 5 from 3x3 up, 3 on 2x2, where up is down and left is
  right, 1 alone); 5 when the file names no clients."""
  side = math.isqrt(clients) if clients else 3
  return {1: 1, 2: 3}.get(side, 5)


def read(path, coupling: str = "library") -> dict:
  """The config overrides of the Lipizzaner configuration at ``path``: a dict of
  ``configs/base.py`` field -> value. :class:`UnsupportedField` names the first field or
  value it cannot map.

  ``coupling="library"`` (default): the file's settings in the library's own operators
  (``schedule="lipizzaner"``); ``"reference"``: also :data:`REFERENCE_COUPLING`, the
  reference's training phase and its named behaviours (how the ring outcome study's library
  arms run: tests/parity/test_ring_outcome_join.py)."""
  import yaml

  if coupling not in ("library", "reference"):
    raise UnsupportedField(f"coupling: {coupling!r} is not 'library' or 'reference'")
  path = Path(path)
  tree = yaml.load(path.read_text(), _loader(path.parent)) or {}
  flat = _flatten(tree)
  out: dict = {
    "lookahead": False,
    "schedule": "lipizzaner",
    "b1": 0.5,
    "b2": 0.999,
    "tournament_sampling": "without_replacement",
    "fitness_noise": "fresh",
  }
  get = flat.get
  for name in flat:
    if name in FIELDS or name.startswith(_IGNORED_PREFIXES) or name.endswith(".cuda"):
      continue
    raise UnsupportedField(f"{name}: not a field this reader maps (see FIELDS)")
  _require("lipizzaner_gan")(get("trainer.name", "lipizzaner_gan"), "trainer.name")
  _require_fitness_section(flat)
  flat = {**TRAINER_DEFAULTS, **flat}
  get = flat.get
  _require(True)(get("trainer.params.score.enabled", True), "trainer.params.score.enabled")
  _require(True)(get("dataloader.use_batch", True), "dataloader.use_batch")
  network = _choice(NETWORKS)(get("network.name", "four_layer_perceptron"), "network.name")
  out.update(network)
  out["loss"] = _choice(LOSSES)(get("network.loss", "bceloss"), "network.loss")
  dataset = _choice(DATASETS)(get("dataloader.dataset_name", "mnist"), "dataloader.dataset_name")
  out["dataset"] = dataset
  records = 60000
  if get("dataloader.dataset_name") == "ring8":  # lipizzaner_ring_entry.py's data set
    records = int(get("dataloader.batch_size", 100)) * int(get("dataloader.n_batches", 0))
    out["dataset_size"] = records
  elif dataset == "ring8":
    modes = get("dataloader.number_of_modes", 8)
    if modes != 8:
      raise UnsupportedField(f"dataloader.number_of_modes: only 8 is supported, got {modes!r}")
    records = int(get("dataloader.number_of_records", 10000))
    out["dataset_size"] = records
  p = "trainer.params."
  for field, ours in _PLAIN_FIELDS.items():
    if field in flat:
      out[ours] = flat[field]
  out["lr_mutation"] = "reference_as_run"  # what the reference's code does (FIELDS)
  if p + "discriminator_skip_each_nth_step" in flat:
    out["d_every"] = _d_every(flat[p + "discriminator_skip_each_nth_step"])
  if p + "fitness.fitness_mode" in flat:
    out["fitness_mode"] = _choice(FITNESS_MODES)(flat[p + "fitness.fitness_mode"], p + "fitness")
  mode = get("trainer.mixture_generator_samples_mode")
  if mode is not None:
    out["mixture_sampling"] = _choice(SAMPLES_MODES)(mode, "trainer.mixture_generator_samples_mode")
  score = get(p + "score.type", "fid")
  _choice(dict.fromkeys(SCORES))(score, p + "score.type")
  members = _members(_clients(get("general.distribution.client_nodes")))
  if p + "score.score_sample_size" in flat:
    out["mixture_samples"] = math.ceil(int(flat[p + "score.score_sample_size"]) / members)
  n_batches = int(get("dataloader.n_batches", 0))
  out["steps_per_generation"] = n_batches or records // int(out.get("batch_size", 100))
  clients = _clients(get("general.distribution.client_nodes"))
  if clients:
    side = math.isqrt(clients)
    if side * side != clients:
      raise UnsupportedField(
        f"general.distribution.client_nodes: {clients} clients is not a square grid"
      )
    out["rows"] = out["cols"] = side
  if coupling == "reference":
    out.update(REFERENCE_COUPLING, opponents="selected" if out["selection"] else "neighbourhood")
  return out


GOLDEN_TESTS = "tests/parity/test_lipizzaner_golden.py::"
# field -> the tests that check its effect against the original's own output (the golden files
# of issue 45, tests/parity/); a field not here is "not compared".
CHECKED_AGAINST: dict[str, tuple[str, ...]] = {
  "trainer.params.population_size": ("test_training_phase",),
  "trainer.params.tournament_size": (
    "test_tournament_winners_are_the_best_of_the_drawn",
    "test_tournament_distribution",
  ),
  "trainer.params.n_replacements": ("test_replacement",),
  "trainer.params.default_adam_learning_rate": ("test_training_phase",),
  "trainer.params.alpha": ("test_lr_mutation_rule",),
  "trainer.params.mutation_probability": ("test_lr_mutation_rule", "test_training_phase"),
  "trainer.params.discriminator_skip_each_nth_step": ("test_training_phase",),
  "trainer.params.mixture_sigma": ("test_mixture_es_step",),
  "trainer.params.enable_selection": ("test_fitness_matrix", "test_training_phase"),
  "trainer.params.fitness.fitness_sample_size": ("test_fitness_matrix",),
  "trainer.params.fitness.fitness_mode": ("test_fitness_matrix",),
  "network.loss": ("test_fitness_matrix",),
  "general.distribution.client_nodes": ("test_transposed_neighbourhoods",),
  "general.seed": ("test_one_seed_for_every_client",),
}


def parity_table() -> str:
  """The README block ``lipizzaner_fields``: every reference field, our field, how it maps
  (same, variant, checked, ignored), the note, and the tests that check it against the
  original's output (:data:`CHECKED_AGAINST`) or "not compared"."""
  lines = [
    "| Lipizzaner field | minmaxlab | how | note | checked against the original's output |",
    "|---|---|---|---|---|",
  ]
  for name, (ours, how, note) in FIELDS.items():
    tests = (
      ", ".join(f"`{GOLDEN_TESTS}{t}`" for t in CHECKED_AGAINST.get(name, ())) or "not compared"
    )
    lines.append(f"| `{name}` | {ours} | {how} | {note} | {tests} |")
  return "\n".join(lines)


def _register() -> None:
  from experiments import _report

  _report.register(
    "lipizzaner_fields", "experiments/coevolution/README.md", f"{__name__}:parity_table"
  )


_register()


def main(argv=None) -> None:
  import sys

  args = sys.argv[1:] if argv is None else argv
  if len(args) != 1:
    raise SystemExit("usage: python -m experiments.coevolution.lipizzaner_config CONFIG.yml")
  try:
    for k, v in sorted(read(args[0]).items()):
      print(f"{k} = {v!r}")
  except (UnsupportedField, OSError) as e:
    raise SystemExit(f"ERROR: {e}") from None


if __name__ == "__main__":
  main()
