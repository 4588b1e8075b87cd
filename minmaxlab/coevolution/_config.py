"""Configuration of spatial coevolution, validated when it is built."""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, Literal, NamedTuple, get_args

from minmaxlab.coevolution._grid import neighbour_offsets

# Each string option's values, defined once: the field's type, and the check in
# ``CoevolutionConfig.__post_init__`` reads the allowed set from it (``get_args``).
FitnessMode = Literal["average", "worst", "best"]
CellStrategy = Literal["auto", "vmap", "map"]
Schedule = Literal["simultaneous", "lipizzaner", "reference"]
DPhase = Literal["last", "first"]
NeighbourhoodLayout = Literal["rows", "transposed"]
CellSeeds = Literal["per_cell", "shared"]
RescoreOwn = Literal["pool", "trained"]
MixtureGenerators = Literal["pool", "trained"]
GeneratorSelection = Literal["tournament", "lineage"]
TournamentSampling = Literal["with_replacement", "without_replacement"]
FitnessNoise = Literal["shared", "fresh"]
LrMutation = Literal["per_generation", "reference", "reference_as_run"]
MustangsLoss = Literal["ns_bce", "lsgan", "heuristic"]
MustangsMode = Literal["at_creation", "always"]
Opponents = Literal["auto", "selected", "neighbourhood"]
Matmuls = Literal["float32", "bfloat16"]
DForward = Literal["separate", "joined"]

FITNESS_MODES = get_args(FitnessMode)
CELL_STRATEGIES = get_args(CellStrategy)
SCHEDULES = get_args(Schedule)
D_PHASES = get_args(DPhase)
NEIGHBOURHOOD_LAYOUTS = get_args(NeighbourhoodLayout)
CELL_SEEDS = get_args(CellSeeds)
RESCORE_OWN = get_args(RescoreOwn)
GENERATOR_SELECTIONS = get_args(GeneratorSelection)
TOURNAMENT_SAMPLINGS = get_args(TournamentSampling)
FITNESS_NOISES = get_args(FitnessNoise)
LR_MUTATIONS = get_args(LrMutation)
MUSTANGS_LOSSES = get_args(MustangsLoss)
MUSTANGS_MODES = get_args(MustangsMode)


@dataclasses.dataclass(frozen=True)
class CoevolutionConfig:
  """Static settings of a Lipizzaner-style coevolution (defaults: the reference's).

  Attributes:
    rows, cols: the torus.
    neighbourhood: ``"von_neumann"`` (cell + 4, the default), ``"moore"`` (cell + 8),
      a radius ``"von_neumann:2"`` / ``"moore:2"`` (Manhattan / Chebyshev distance
      <= 2), ``"custom:0,0;1,1;-2,0"`` or a tuple of ``(drow, dcol)`` offsets, the
      cell ``(0, 0)`` first (see ``minmaxlab.coevolution.neighbour_offsets``).
    population_size: generators and discriminators kept per cell.
    selection: tournament selection over the neighbourhood (Lipizzaner's
      ``enable_selection``); off: each cell trains its own individuals in place
      and keeps them (as Lipizzaner: no replacement test).
    generator_selection: with ``selection`` on, how a cell picks its generators:
      ``"tournament"`` (Lipizzaner: over the neighbourhood, like the
      discriminators) or ``"lineage"`` (a diversity-preserving variant, not
      Lipizzaner's: the cell keeps its own generators, so a neighbour's lineage
      never takes the cell over; the trained copy still replaces the local one
      only when it scores better; the discriminators are selected by tournament).
    tournament_size: candidates per tournament.
    tournament_sampling: ``"with_replacement"`` (default: a candidate may be drawn twice)
      or ``"without_replacement"`` (distinct candidates: Lipizzaner's ``random.sample``).
    n_replacements: worst local individuals replaced by better trained ones.
    fitness_mode: aggregate of an individual's losses over its opponents:
      ``"average"``, ``"worst"`` (max loss) or ``"best"`` (min loss).
    fitness_samples: real samples and noise vectors of the fitness batch.
    fitness_noise: ``"shared"`` (default: one noise draw per generation serves every
      fitness evaluation and the trained individuals' rescoring) or ``"fresh"``
      (Lipizzaner's: each evaluation of a generator against a discriminator, and of a
      discriminator against a generator, draws its own noise; the rescoring too).
    learning_rate: initial learning rate of both players (Lipizzaner's
      ``default_adam_learning_rate``, ``lr0`` below).
    lr_mutation: when and how learning rates are mutated (with probability
      ``p = mutation_probability``, ``alpha = mutation_scale``):
      ``"per_generation"`` (default, this library's rule): each selected individual's
      learning rate gets ``+ alpha * N(0, 1)`` once per generation, clipped to at least
      ``min_learning_rate``, and its updates use it.
      ``"reference"`` (Lipizzaner's rule as written): before every update of a player
      (each batch where it steps), ``lr <- max(0, lr + alpha * N(-lr0 / 10, lr0))``,
      and that update uses the mutated value (``min_learning_rate`` unused).
      ``"reference_as_run"`` (what Lipizzaner's code does): the same mutations of the
      tracked learning rate (``CoevolutionState.learning_rates``, the logged ``lr_g``,
      ``lr_d``), but each update builds ``Adam(lr=mutated)`` and then
      ``load_state_dict(saved)``, which restores the saved param group's ``lr``
      (PyTorch's ``state_dict`` holds it, ``load_state_dict`` overwrites the new
      optimizer's): an individual's updates all use the learning rate of its first
      update (``lr0`` after one mutation), inherited by its copies with the optimizer
      state. So the paper's runs trained at ``lr0 + alpha * N(-lr0/10, lr0)`` with
      probability ``p``, else ``lr0``, fixed per lineage. See
      ``minmaxlab.coevolution._lr_mutation``.
    mutation_probability, mutation_scale: ``p`` and ``alpha`` of ``lr_mutation``.
    min_learning_rate: ``"per_generation"``'s mutated learning rates are clipped to at
      least this.
    batch_size: training minibatch.
    steps_per_generation: training steps per generation (Lipizzaner: one epoch).
      Every step draws a fresh minibatch and updates the generators.
    d_every: the discriminators update on every ``d_every``-th step only
      (steps ``i`` with ``(i + 1) % d_every == 0`` of a generation; the other
      steps update the generators alone, without computing the
      discriminators' gradients). 1 (default): both players every step;
      2: Lipizzaner's MNIST/CIFAR schedule (``discriminator_skip_each_nth_step:
      1``), about 0.74x the FLOPs per step for its MLP pair. Must be in
      ``[1, steps_per_generation]``.
    schedule: the order of the two players' updates on a batch where both train:
      ``"simultaneous"`` (default): one update of both from one shared forward pass
      (the discriminator plays the fakes of the generator before its step);
      ``"lipizzaner"``: the generator steps, then the discriminator steps against the
      UPDATED generator with fresh fakes (Lipizzaner's trainer; each player's update
      is its own scheme update, and a shared counter such as Lookahead's still counts
      batches). With ``d_every=2`` this is Lipizzaner's MNIST schedule, but for the
      phase: its discriminator steps on batches 0, 2, 4, ..., here on 1, 3, 5, ...
      (``d_phase="first"`` gives its phase).
      ``"reference"``: ``"lipizzaner"`` with Lipizzaner's choice of opponents as its
      ``update_genomes`` makes it: ONE opponent drawn per batch and side, played by every
      individual of the population (``"lipizzaner"`` draws one per individual; the same
      for ``population_size=1``). With plain Adam (``default_scheme(lookahead=False)``),
      ``d_phase="first"`` and ``lr_mutation="reference_as_run"`` this is the reference's
      training phase (tests/parity/test_lipizzaner_golden.py).
    d_phase: with ``d_every > 1`` (or ``n_critic > 1``), which batch of each group of
      ``k`` updates both players: ``"last"`` (default: batches ``k-1, 2k-1, ...``) or
      ``"first"`` (Lipizzaner's ``batch_number % (skip + 1) == 0``: batches ``0, k, 2k, ...``).
    neighbourhood_layout: ``"rows"`` (default: cell ``(r, c)``'s members are its own
      offsets on the torus) or ``"transposed"`` (Lipizzaner's ``_adjacent_cells`` as it
      runs: it indexes its neighbour mask ``[x, y]`` while the cells are laid out by rows,
      so cell ``(r, c)`` gets the cell itself plus the neighbours of cell ``(c, r)``;
      cell 1 of a 3x3 grid: {0, 4, 5, 6}, not {0, 2, 4, 7}; the same on 2x2 and on the
      diagonal). Square grids only. See ``minmaxlab.coevolution._layout``.
    cell_seeds: ``"per_cell"`` (default: each cell's random numbers from its own key,
      ``fold_in(key, cell id)``) or ``"shared"`` (Lipizzaner's ``get_heuristic_seed``
      discards the sum it computes, so every client runs the same seed: every cell draws
      the same batches, noise, opponent indices, mutations and ES steps; here every
      cell's key is ``fold_in(key, 0)``).
    rescore_own: without ``selection``, whom the trained individuals' rescoring plays in
      the cell's own slots: ``"pool"`` (default: the cell's individuals as they were at the
      generation's start, like the neighbours') or ``"trained"`` (Lipizzaner: its
      ``all_discriminators`` holds the cell's own discriminator as the same object, so the
      trained generator is rescored against the trained discriminator, and vice versa).
      Only the rescored fitness changes (the logged ``g_fitness``/``d_fitness`` and, with
      ``population_size > 1``, which own generator the mixture takes).
    mixture_generators: which generators the mixture-weight ES weighs: ``"pool"``
      (default: the neighbours' best as gathered at the generation's start, the cell's own
      after replacement) or ``"trained"`` (Lipizzaner: its ES reads each neighbour's best
      generator over HTTP when it runs, after the neighbour's own training; here a second
      exchange after every cell's training and replacement gathers them, and the ES runs
      on those). With ``"trained"`` a non-finite mixture score resets the cell's weights
      but does not re-seed its individuals (their own divergence test still does).
    loss: a name of ``minmaxlab.gan.losses.LOSSES`` (except ``"wgan_gp"``),
      ``"mustangs"`` (each individual trains with BCE, least squares or heuristic
      drawn at random, see ``mustangs_mode``) or ``"wgan"`` (Lipizzaner's WGAN
      trainer: a critic without sigmoid trained on the Wasserstein loss, RMSprop
      by default, the critic's weights clipped to ``[-wgan_clip, wgan_clip]``
      after every critic update, ``n_critic`` critic updates per generator update).
    mustangs_mode: with ``loss="mustangs"`` (Lipizzaner's ``network.randomized``):
      ``"at_creation"`` (default, the reference's: ``randomized`` unset): each
      generator and each discriminator draws its loss when it is created
      (``Coevolution.init``, or a fresh re-seed); the index is kept in
      ``CoevolutionState.loss_index`` and moves with the individual through
      selection, replacement and repair; its fitness and training use it.
      ``"always"``: the generator draws a new loss for every training batch
      (Lipizzaner re-picks in the generator's loss call); discriminators keep
      their creation loss, and a generator's stored index is used for its
      fitness. (Lipizzaner's G and D share one loss object, so there ``always``
      never re-randomises: research/lipizzaner.md §8.3; this is the intent.)
    n_critic: critic (discriminator) updates per generator update: of every group
      of ``n_critic`` batches the first ``n_critic - 1`` update the discriminators
      alone and the last one updates both (as ``schedule`` says); leftover batches
      of a partial group are critic updates. The mirror of ``d_every`` (which
      skips discriminator steps): ``n_critic = k`` gives ``k`` discriminator
      updates per generator update, ``d_every = k`` gives ``1 / k``; at most one
      of them may exceed 1. Lipizzaner's WGAN: 5.
    wgan_clip: with ``loss="wgan"``, the critic's weights are clipped to
      ``[-wgan_clip, wgan_clip]`` after each of its updates (Lipizzaner: 0.01).
      Fitness with ``"wgan"`` is each player's Wasserstein loss against its
      opponents (generator ``-E D(G(z))``, critic ``E D(G(z)) - E D(x)``: lower is a
      larger estimated distance), so selection and replacement rank critics by
      the distance they estimate; the mixture is scored by ``score_fn`` (FID/TVD of
      samples) as for every loss. Lipizzaner's WGAN trainer overrides only the
      updates: its fitness is its GAN trainer's (the configured ``network.loss``
      on the discriminator's output). Not implemented: its 100 critic steps for
      the first 25 generator steps and every 500th. A critic-only batch leaves
      the scheme's shared state (e.g. Lookahead's step counter) as it was.
    mixture_sigma: step of the mixture-weight (1+1)-ES.
    mixture_samples: samples per generator for the mixture score.
    opponents: whom a trained individual plays each step: ``"selected"`` (the
      other side's selected individuals of the cell, Lipizzaner with selection),
      ``"neighbourhood"`` (those plus every neighbour's, Lipizzaner without
      selection) or ``"auto"`` (``"selected"`` when ``selection`` is on).
    cell_strategy: how cells are stepped inside the one jitted step:
      ``"vmap"`` (batched), ``"map"`` (sequential ``lax.map``) or ``"auto"``
      (``map`` on CPU, where it was faster for MLP cells; tiny 2-D networks
      run faster with ``"vmap"``; docs/benchmarks.md),
      ``vmap`` elsewhere.
    matmuls: the step's dense-layer matmuls: ``"float32"`` (default) or ``"bfloat16"``
      (bfloat16 operands, float32 accumulation and result, forward and backward;
      parameters and everything else float32; changes the numerics; see
      ``minmaxlab.coevolution._fast_matmul``).
    d_forward: how a discriminator's update evaluates the real batch and the fakes:
      ``"separate"`` (default: two forward passes) or ``"joined"`` (one forward pass on
      the two batches concatenated, then split: the same values for a discriminator
      whose rows are independent, i.e. without batch statistics, to float rounding).
  """

  rows: int = 3
  cols: int = 3
  neighbourhood: str | tuple[tuple[int, int], ...] = "von_neumann"  # a small language
  population_size: int = 1
  selection: bool = True
  generator_selection: GeneratorSelection = "tournament"
  tournament_size: int = 2
  tournament_sampling: TournamentSampling = "with_replacement"
  n_replacements: int = 1
  fitness_mode: FitnessMode = "average"
  fitness_samples: int = 1000
  fitness_noise: FitnessNoise = "shared"
  learning_rate: float = 2e-4
  lr_mutation: LrMutation = "per_generation"
  mutation_probability: float = 0.5
  mutation_scale: float = 1e-4
  min_learning_rate: float = 1e-7
  batch_size: int = 100
  steps_per_generation: int = 600
  d_every: int = 1
  schedule: Schedule = "simultaneous"
  loss: str = "ns_bce"  # a name of gan.losses.LOSSES, "mustangs" or "wgan" (Coevolution checks)
  mustangs_mode: MustangsMode = "at_creation"
  n_critic: int = 1
  wgan_clip: float = 0.01
  mixture_sigma: float = 0.01
  mixture_samples: int = 1000
  opponents: Opponents = "auto"
  cell_strategy: CellStrategy = "auto"
  matmuls: Matmuls = "float32"
  d_forward: DForward = "separate"
  d_phase: DPhase = "last"
  neighbourhood_layout: NeighbourhoodLayout = "rows"
  cell_seeds: CellSeeds = "per_cell"
  rescore_own: RescoreOwn = "pool"
  mixture_generators: MixtureGenerators = "pool"

  def __post_init__(self):
    def bad(name, expected):
      raise ValueError(f"{name} must be {expected}, got {getattr(self, name)!r}")

    for name in (
      "rows",
      "cols",
      "population_size",
      "tournament_size",
      "fitness_samples",
      "batch_size",
      "steps_per_generation",
      "mixture_samples",
    ):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        bad(name, "an integer >= 1")
    d = self.d_every
    if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= self.steps_per_generation:
      bad("d_every", f"an integer in [1, steps_per_generation={self.steps_per_generation}]")
    n = self.n_critic
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= self.steps_per_generation:
      bad("n_critic", f"an integer in [1, steps_per_generation={self.steps_per_generation}]")
    if n > 1 and d > 1:
      bad("n_critic", f"1 when d_every > 1 (d_every={d})")
    n = self.n_replacements
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= self.population_size:
      bad("n_replacements", f"an integer in [0, population_size={self.population_size}]")
    offsets = neighbour_offsets(self.neighbourhood)  # ValueError naming the bad value
    if not isinstance(self.neighbourhood, str):  # a tuple of offsets: hashable, checked ints
      object.__setattr__(self, "neighbourhood", offsets)
    for name, choices in _choices(type(self)).items():
      if getattr(self, name) not in choices:
        bad(name, f"one of {choices}")
    if self.neighbourhood_layout == "transposed" and self.rows != self.cols:
      bad("neighbourhood_layout", f"'rows' on a {self.rows}x{self.cols} grid (transposed: square)")
    if not 0.0 <= self.mutation_probability <= 1.0:
      bad("mutation_probability", "in [0, 1]")
    for name in ("mutation_scale", "mixture_sigma"):
      if not getattr(self, name) >= 0.0:
        bad(name, ">= 0")
    for name in ("learning_rate", "min_learning_rate", "wgan_clip"):
      if not getattr(self, name) > 0.0:
        bad(name, "> 0")

  @property
  def num_cells(self) -> int:
    return self.rows * self.cols

  @property
  def num_members(self) -> int:
    return len(neighbour_offsets(self.neighbourhood))


@functools.cache
def _choices(cls) -> dict[str, tuple[str, ...]]:
  """``{field: allowed values}`` of every ``Literal``-typed field of a config class."""
  hints = typing.get_type_hints(cls)
  return {
    f.name: get_args(hints[f.name])
    for f in dataclasses.fields(cls)
    if typing.get_origin(hints[f.name]) is Literal
  }


class CoevolutionParams(NamedTuple):
  """The tunable (traced) float parameters of the operators, evosax style: pass
  them to ``Coevolution.step`` to vmap, tune or schedule them without a
  recompile. Defaults: ``Coevolution.default_params()`` (the config's values).

  Attributes:
    mutation_probability: probability that a learning rate is mutated (``p`` of
      ``CoevolutionConfig.lr_mutation``).
    mutation_scale: ``alpha`` of ``CoevolutionConfig.lr_mutation`` (per generation: the
      standard deviation of the step).
    min_learning_rate: ``"per_generation"``'s mutated learning rates are clipped to at
      least this.
    mixture_sigma: step of the mixture-weight (1+1)-ES.
  """

  mutation_probability: Any
  mutation_scale: Any
  min_learning_rate: Any
  mixture_sigma: Any
