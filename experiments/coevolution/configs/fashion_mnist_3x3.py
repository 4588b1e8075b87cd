"""Fashion-MNIST (Debian ``dataset-fashion-mnist`` files), Lipizzaner's MNIST MLP pair.

G 64-256-256-784 (tanh), D 784-256-256-1, batch 100, Adam(2e-4, 0.5, 0.999) with
Lookahead-minmax, and Lipizzaner's training schedule: per batch the generator steps, then on
every second batch (``d_every=2``) the discriminator steps against the updated generator with
fresh fakes (``schedule="lipizzaner"``). Lipizzaner's operators as its code runs them (the
``lipizzaner-gan/mnist.yml`` setting, selection on): ``--config.lookahead=False`` (plain Adam)
``--config.lr_mutation=reference_as_run`` (its learning-rate mutation before every update, the
update using the learning rate its optimizer state restores)
``--config.tournament_sampling=without_replacement --config.fitness_noise=fresh``; its
neurips2018 MNIST runs: ``configs/lipizzaner.py`` with their YAML file. The results tables of
experiments/coevolution/README.md measured before this default used
``--config.schedule=simultaneous --config.d_every=1``. The mixture (1+1)-ES scores
classifier-FID inside the step (the evaluation CNN's 128-d features, trained once and cached).
Lipizzaner trains a full epoch (600 batches) per generation for 200 generations; this
CPU-sized default takes 100 steps per generation.
"""

from experiments.coevolution.configs import base


def get_config():
  c = base.get_config()
  c.dataset = "fashion_mnist"
  c.architecture = "mlp"
  c.latent_dim = 64
  c.hidden = (256, 256)
  c.rows = c.cols = 3
  c.learning_rate = 2e-4
  c.batch_size = 100
  c.steps_per_generation = 100
  c.schedule = "lipizzaner"
  c.d_every = 2
  c.fitness_samples = 1000
  c.mixture_samples = 200  # per generator, for the in-step FID of the mixture
  c.generations = 20
  c.eval_every = 5
  c.plot_every = 5
  c.checkpoint_every = 5
  c.num_eval_samples = 5000
  c.cell_samples = 16
  return c
