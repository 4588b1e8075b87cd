"""Defaults shared by every ``experiments.coevolution`` config (override in a file or by flag)."""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  # Data: "ring8", "grid25" (2-D mixtures) or an image set of minmaxlab.gan.data.load
  # ("fashion_mnist", "digits", "idx:<dir>", ...).
  c.dataset = "ring8"
  c.data_dir = ""  # "" = the data set's default location
  # Model: minmaxlab.gan.models.make_pair("mlp", data_shape, latent_dim, hidden=...).
  c.architecture = "mlp"
  c.latent_dim = 0  # 0 = the architecture's default (mlp 64)
  c.hidden = (64, 64)
  # The MLPs' initialisation (minmaxlab.gan.models.from_linen): "fan_in_uniform" (kernels
  # U(+-sqrt(3/fan_in)), zero biases) or "torch" (PyTorch's nn.Linear default, kernels and
  # biases U(+-1/sqrt(fan_in)): how Lipizzaner's networks start).
  c.initializer = "fan_in_uniform"
  # True: each network's parameters as ONE vector (minmaxlab.gan.models.flat): the same
  # values and results, fewer arrays in the state, a smaller program (compile_time.py).
  c.flat_params = False
  # The grid and Lipizzaner's operators (minmaxlab.coevolution.CoevolutionConfig fields).
  c.rows = 3
  c.cols = 3
  # "von_neumann" | "moore" | "moore:2" | "von_neumann:2" (radius) | "custom:0,0;1,1;-2,0"
  c.neighbourhood = "von_neumann"
  c.population_size = 1
  c.selection = True
  # "tournament" (Lipizzaner) or "lineage": each cell keeps its own generators (issue 18)
  c.generator_selection = "tournament"
  c.tournament_size = 2
  # "with_replacement" (a candidate may fill two places) or "without_replacement" (Lipizzaner)
  c.tournament_sampling = "with_replacement"
  c.n_replacements = 1
  c.fitness_mode = "average"  # "average" | "worst" | "best"
  c.fitness_samples = 1000
  # "shared" (one noise draw per generation) or "fresh" (per evaluation, as Lipizzaner)
  c.fitness_noise = "shared"
  c.learning_rate = 2e-4
  # Learning-rate mutation: "per_generation" (+ mutation_scale N(0, 1) w.p. mutation_probability
  # once per generation), "reference" (Lipizzaner's max(0, lr + alpha N(-lr0/10, lr0)) before
  # every update) or "reference_as_run" (the same, but each update uses the learning rate its
  # optimizer state restores: the first update's, as Lipizzaner's load_state_dict does).
  c.lr_mutation = "per_generation"
  c.mutation_probability = 0.5
  c.mutation_scale = 1e-4
  c.batch_size = 100
  c.steps_per_generation = 600
  # The discriminators train on every d_every-th batch only (the generators on every batch):
  # 1 = both every batch; 2 = Lipizzaner's MNIST schedule (with lookahead=False: its parity).
  c.d_every = 1
  # Order of the players' updates on a batch where both train: "simultaneous" (one update of
  # both from one forward pass) or "lipizzaner" (the generator steps, then the discriminator
  # against the updated generator with fresh fakes: Lipizzaner's trainer).
  c.schedule = "simultaneous"
  # Lipizzaner's behaviours as its code runs them (issue 45, tests/parity): schedule
  # "reference" (as "lipizzaner", one opponent per batch for the whole population);
  # d_phase "first" (with d_every > 1 the discriminator on batches 0, k, 2k, ...);
  # neighbourhood_layout "transposed" (its _adjacent_cells); cell_seeds "shared" (its
  # get_heuristic_seed: every cell one seed).
  c.d_phase = "last"
  c.neighbourhood_layout = "rows"
  c.cell_seeds = "per_cell"
  # Without selection, the rescoring's own opponents: "pool" (as at the generation's start)
  # or "trained" (Lipizzaner: its trained local individuals).
  c.rescore_own = "pool"
  # The generators the mixture ES weighs: "pool" (the neighbours' as gathered at the
  # generation's start) or "trained" (Lipizzaner: each neighbour's after its training).
  c.mixture_generators = "pool"
  # A minmaxlab.gan.losses name (not wgan_gp), "mustangs" or "wgan" (Lipizzaner's WGAN trainer:
  # Wasserstein critic, RMSprop instead of Adam, the critic clipped to [-wgan_clip, wgan_clip];
  # Lipizzaner: --config.loss=wgan --config.n_critic=5 --config.lookahead=False).
  c.loss = "ns_bce"
  # Mustangs (Lipizzaner's network.randomized): "at_creation" (each individual's loss drawn
  # when it is created and inherited) or "always" (the generator's drawn every batch).
  c.mustangs_mode = "at_creation"
  # Critic updates per generator update (the mirror of d_every; at most one of them > 1).
  c.n_critic = 1
  c.wgan_clip = 0.01
  c.mixture_sigma = 0.01
  c.mixture_samples = 1000
  c.cell_strategy = "auto"  # "auto" | "vmap" | "map"
  # Speed options of the step (docs/benchmarks.md, "Past the floor"): "bfloat16" runs every
  # dense layer's matmuls on bfloat16 copies with float32 accumulation (changes the numerics);
  # d_forward "joined" evaluates a discriminator's real and fake batches in one forward pass.
  c.matmuls = "float32"
  c.d_forward = "separate"
  # Data dieting (Lipizzaner's sampling_ratio): each cell trains on its own random subset of
  # this fraction of the data, fixed for the run and keyed by diet_seed and the cell id. 2-D
  # mixtures then use a finite data set of dataset_size points (Lipizzaner's 2-D: 10000).
  c.sampling_ratio = 1.0
  c.dataset_size = 10000
  c.diet_seed = 0
  # Samples of a generator mixture (the cells' mixture score and the evaluation samples):
  # "independent" (each sample's generator drawn by weight) or "exact_proportion" (generator i
  # makes round(w_i n) of n samples): Lipizzaner's mixture_generator_samples_mode.
  c.mixture_sampling = "independent"
  # Where the grid runs (same numbers on every backend for the same seed):
  #   "auto": on a CPU host whose cores the grid's rows and columns split into one block
  #   each, one single-threaded CPU device per core and the cells sharded over them
  #   (minmaxlab.distributed.split_cpu_cores; a 2x2 grid on 2 cores: a row of cells per
  #   core); else (3x3 on 2 cores, JAX_NUM_CPU_DEVICES set, a GPU) as "single";
  #   "single": one device; "mesh": cells sharded over a device mesh (every local device,
  #   or every device of a multi-process job, see `distributed`); "mpi": one block of
  #   the grid per MPI rank (launch with `mpirun -n P python -m experiments.coevolution.main`).
  c.backend = "auto"
  c.mesh_shape = ()  # (mesh rows, mesh cols); () = (number of devices, 1)
  c.mesh_exchange = "shard_map"  # "shard_map" (explicit ppermute halos) | "roll" (XLA-derived)
  c.mpi_blocks = ()  # (block rows, block cols) over the ranks; () = rows (else cols) per rank
  # Multi-process JAX for backend="mesh" (before any computation):
  #   "" (one process) | "auto" (jax.distributed.initialize() detects the cluster) |
  #   "mpi4py" (under mpirun) | "<host>:<port>/<num_processes>/<process_id>".
  c.distributed = ""
  # XLA options of the programs (minmaxlab.distributed.compiler_options): "default" (XLA's);
  # on CPU "fast" (LLVM -O1: compiles in about 0.7x the time, generations measured no slower
  # on smoke, ring8_3x3 and fashion_mnist_3x3) or "fastest" (also the classic emitters: about
  # 0.55x, generations 6-11% slower). Not guaranteed bit-identical to "default" (fastest
  # differs); experiments/benchmarks/compile_time.py measures each.
  c.compile = "fast"
  # The optimizer inside every cell: Lookahead-minmax over Adam (lookahead=False: plain Adam).
  c.lookahead = True
  c.sync_period = 5
  c.slow_step_size = 0.5
  c.b1 = 0.5
  c.b2 = 0.999
  # Loop (counted in generations).
  c.generations = 10
  c.diverged_patience = 3  # stop (exit 1) once every cell diverged this many generations in a row
  c.eval_every = 1  # best-mixture metrics
  c.plot_every = 1  # PNG of every cell's samples (0 = only the last generation)
  c.checkpoint_every = 1
  c.keep_checkpoints = 3
  c.num_eval_samples = 2000  # samples of the best mixture for the metrics
  # After training (main.py; or later: python -m experiments.coevolution.ensembles): Lipizzaner's
  # post-training ensembles of the finished grid, each written to ensemble_<method>.json.
  c.ensembles = ml_collections.ConfigDict()
  c.ensembles.methods = ()  # any of "es" (optimize_mixture), "greedy", "ga" (GECCO'20)
  c.ensembles.score = "auto"  # "auto" (the run's: tvd on 2-D, fid on images) | "tvd" | "fid"
  c.ensembles.sampling = "independent"  # mixture samples: "independent" | "exact_proportion"
  c.ensembles.samples = 0  # samples per generator for the score; 0 = mixture_samples
  # The reference's defaults: es_generations 50, mixture_sigma 0.01, es_random_init False.
  c.ensembles.es = ml_collections.ConfigDict({"generations": 50, "sigma": 0.01})
  c.ensembles.es.random_init = False
  c.ensembles.greedy = ml_collections.ConfigDict({"max_size": 5, "patience": 4, "precision": 10})
  c.ensembles.greedy.order = "iterative"  # or "random"
  c.ensembles.ga = ml_collections.ConfigDict({"min_size": 3, "max_size": 8, "generations": 20})
  c.ensembles.ga.population_size = 5
  c.ensembles.ga.crossover_probability = 0.8
  c.ensembles.ga.mutation_probability = 0.2
  c.cell_samples = 500  # per cell in the grid plot (images: the first 16 are shown)
  # Evaluation classifier (image data sets): trained once, cached.
  c.classifier = ml_collections.ConfigDict()
  c.classifier.steps = 1500
  c.classifier.cache_dir = ""  # "" = ~/.cache/minmaxlab/classifiers (or $MINMAXLAB_CACHE)
  c.tensorboard = True
  c.progress = True
  return c
