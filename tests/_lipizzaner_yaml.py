"""Lipizzaner's neurips2018 MNIST configuration and its ``general`` file, written with the
reference's field names (the reference's files are not shipped): the reader's tests and the
ring outcome study's join test write them to a temporary folder."""

MNIST = """\
trainer:
  name: lipizzaner_gan
  n_iterations: 200
  calculate_net_weights_dist: True
  mixture_generator_samples_mode: exact_proportion
  params:
    population_size: 1
    tournament_size: 2
    n_replacements: 1
    default_adam_learning_rate: 0.0002
    alpha: 0.0001
    mutation_probability: 0.5
    discriminator_skip_each_nth_step: 1
    mixture_sigma: 0.01
    enable_selection: False
    score:
      enabled: True
      type: fid
      score_sample_size: 1000
      cuda: True
    fitness:
      fitness_sample_size: 1000
      fitness_mode: average
dataloader:
  dataset_name: mnist
  use_batch: True
  batch_size: 100
  n_batches: 0
  shuffle: True
network:
  name: four_layer_perceptron
  loss: bceloss
master:
  calculate_score: True
  score_sample_size: 50000
  cuda: True
general: !include ../general-{n}x{n}.yml
"""

GENERAL = """\
logging:
  enabled: True
  log_level: INFO
  log_server:
  image_format: jpg
  print_discriminator: False
losswise:
  enabled: False
  api_key:
output_dir: !ENV ${{OUTPUT_FOLDER}}
distribution:
  auto_discover: False
  master_node:
    exit_clients_on_disconnect: True
  client_nodes:
{nodes}
seed: 1
num_workers: 0
"""
