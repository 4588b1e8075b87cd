"""Lipizzaner's YAML configurations read as experiment configs (issue 33 item 1): the
neurips2018 MNIST files and the 2-D quickstart file, written here with the reference's
field names (the reference's files are not shipped)."""

import pytest

from experiments.coevolution import lipizzaner_config as lip
from experiments.coevolution import train
from experiments.coevolution.configs import lipizzaner
from tests._lipizzaner_yaml import GENERAL, MNIST

TOY = """\
trainer:
  name: lipizzaner_gan
  n_iterations: 300
  calculate_net_weights_dist: True
  mixture_generator_samples_mode: exact_proportion
  params:
    population_size: 1
    tournament_size: 2
    n_replacements: 1
    default_adam_learning_rate: 0.0001
    alpha: 0.0001
    mutation_probability: 0.5
    discriminator_skip_each_nth_step: 2
    mixture_sigma: 0.01
    enable_selection: True
    score:
      enabled: True
      type: gaussian_toy_distances
      score_sample_size: 1000
      cuda: False
    fitness:
      fitness_sample_size: 1000
      fitness_mode: worse
dataloader:
  dataset_name: gaussian_circle
  use_batch: True
  batch_size: 100
  n_batches: 0
  shuffle: True
  number_of_modes: 8
  number_of_records: 5000
network:
  name: circular_problem_perceptron
  loss: bceloss
master:
  calculate_score: True
  score_sample_size: 50000
  cuda: False
general: !include general.yml
"""


def _mnist(tmp_path, n):
  (tmp_path / "mnist").mkdir(exist_ok=True)
  ports = f"    - address: 127.0.0.1\n      port: 5000-{5000 + n * n - 1}"
  (tmp_path / f"general-{n}x{n}.yml").write_text(GENERAL.format(nodes=ports))
  path = tmp_path / "mnist" / f"mnist-{n}x{n}.yml"
  path.write_text(MNIST.format(n=n))
  return path


@pytest.mark.parametrize("n", [1, 2, 3, 4, 12])
def test_neurips2018_mnist_maps_every_field(tmp_path, n):
  got = lip.read(_mnist(tmp_path, n))
  assert got == {
    "lookahead": False,
    "schedule": "lipizzaner",
    "b1": 0.5,
    "b2": 0.999,
    "tournament_sampling": "without_replacement",
    "fitness_noise": "fresh",
    "architecture": "mlp",
    "latent_dim": 64,
    "hidden": (256, 256),
    "loss": "ns_bce",
    "dataset": "tfds:mnist",
    "generations": 200,
    "population_size": 1,
    "tournament_size": 2,
    "n_replacements": 1,
    "learning_rate": 0.0002,
    "mutation_scale": 0.0001,
    "mutation_probability": 0.5,
    "lr_mutation": "reference_as_run",  # the update uses the lr load_state_dict restores
    "mixture_sigma": 0.01,
    "selection": False,
    "fitness_samples": 1000,
    "batch_size": 100,
    "num_eval_samples": 50000,
    "seed": 1,
    "d_every": 2,  # discriminator_skip_each_nth_step 1: D on every second batch
    "fitness_mode": "average",
    "mixture_sampling": "exact_proportion",
    # 1000 over the distinct members of a von Neumann neighbourhood: 5, on 2x2 3, alone 1
    "mixture_samples": {1: 1000, 2: 334}.get(n, 200),
    "steps_per_generation": 600,  # n_batches 0: an epoch of 60000 / 100
    "rows": n,
    "cols": n,
  }


def test_the_2d_quickstart_and_its_six_client_hosts(tmp_path):
  nodes = "\n".join(f"    - address: h{i}\n      port: 5000-5005" for i in range(6))
  (tmp_path / "general.yml").write_text(GENERAL.format(nodes=nodes))
  (tmp_path / "toy-circular.yml").write_text(TOY)
  got = lip.read(tmp_path / "toy-circular.yml")
  assert (got["rows"], got["cols"]) == (6, 6)  # 6 hosts x 6 ports
  assert got["dataset"] == "ring8" and got["dataset_size"] == 5000
  assert (got["latent_dim"], got["hidden"]) == (256, (128, 128))
  assert got["d_every"] == 3 and got["selection"] is True and got["fitness_mode"] == "worst"
  assert got["steps_per_generation"] == 50  # 5000 records / batch 100


def test_the_config_file_builds_a_valid_experiment_config(tmp_path):
  config = lipizzaner.get_config(str(_mnist(tmp_path, 2)))
  assert (config.rows, config.cols, config.selection, config.d_every) == (2, 2, False, 2)
  assert config.schedule == "lipizzaner" and config.lookahead is False
  train.check_config(config)  # the grid and operator fields are a valid CoevolutionConfig


@pytest.mark.parametrize(
  "edit,field",
  [
    (("  n_iterations: 200\n", "  n_iterations: 200\n  bogus_field: 3\n"), "trainer.bogus_field"),
    (("name: lipizzaner_gan", "name: lipizzaner_wgan"), "trainer.name"),
    (("type: fid", "type: inception_score"), "trainer.params.score.type"),
    (("name: four_layer_perceptron", "name: convolutional"), "network.name"),
    (("fitness_mode: average", "fitness_mode: median"), "trainer.params.fitness"),
  ],
)
def test_an_unknown_field_or_value_is_one_line_naming_it(tmp_path, capsys, edit, field):
  path = _mnist(tmp_path, 2)
  path.write_text(path.read_text().replace(*edit))
  with pytest.raises(lip.UnsupportedField, match=field.replace(".", r"\.")):
    lip.read(path)
  with pytest.raises(SystemExit) as e:
    lip.main([str(path)])
  assert str(e.value).startswith(f"ERROR: {field}") and "\n" not in str(e.value)


def test_a_grid_that_is_not_square_is_refused(tmp_path):
  path = _mnist(tmp_path, 2)
  general = tmp_path / "general-2x2.yml"
  general.write_text(general.read_text().replace("5000-5003", "5000-5002"))
  with pytest.raises(lip.UnsupportedField, match="3 clients is not a square grid"):
    lip.read(path)


def test_the_parity_table_lists_every_field():
  table = lip.parity_table()
  for name in lip.FIELDS:
    assert f"| `{name}` |" in table
  # every field the MNIST reader test maps is in the table
  assert "trainer.params.discriminator_skip_each_nth_step" in lip.FIELDS


def test_an_omitted_field_takes_the_reference_trainers_default(tmp_path):
  path = _mnist(tmp_path, 2)
  text = path.read_text()
  for line in (
    "    population_size: 1\n",
    "    alpha: 0.0001\n",
    "    mutation_probability: 0.5\n",
    "    discriminator_skip_each_nth_step: 1\n",
    "    default_adam_learning_rate: 0.0002\n",
    "    enable_selection: False\n",
    "      score_sample_size: 1000\n",
    "      fitness_sample_size: 1000\n",
  ):
    assert line in text
    text = text.replace(line, "", 1)
  path.write_text(text)
  got = lip.read(path)
  # LipizzanerGANTrainer's and EvolutionaryAlgorithmTrainer's keyword defaults (f411cb5)
  assert (got["population_size"], got["mutation_scale"], got["mutation_probability"]) == (
    10,
    0.25,
    0.9,
  )
  assert (got["d_every"], got["learning_rate"], got["selection"]) == (1, 0.001, True)
  # the trainer's 10000 score samples over a 2x2 neighbourhood's 3 distinct members
  assert (got["fitness_samples"], got["mixture_samples"]) == (10000, 3334)


def test_a_file_without_a_fitness_mode_is_refused_as_the_reference_refuses_it(tmp_path):
  path = _mnist(tmp_path, 2)
  path.write_text(path.read_text().replace("      fitness_mode: average\n", ""))
  with pytest.raises(lip.UnsupportedField, match=r"trainer\.params\.fitness\.fitness_mode"):
    lip.read(path)
