"""minmaxlab.analysis: game Jacobians, update-operator spectra, trajectories and plots.

* :func:`jacobian` (dense), :func:`jvp_operator` / :func:`vjp_operator`
  (matrix-free) and :func:`top_eigenvalues` (ARPACK on the jitted JVP) of the
  descent field; :func:`decompose` and :func:`summarize_jacobian` split it
  into its potential and rotational parts.
* :func:`update_operator` builds the update map of ANY transform by running
  it; :func:`closed_form_eigenvalues` (GDA, AltGDA, EG, OGDA and Lookahead
  over each) and :func:`spectral_radius_grid` give the exact spectra on
  bilinear games; :func:`contractive_step_sizes` the step sizes for which a
  method contracts, from any game Jacobian.
* :func:`game_dynamics` (jittable, JVPs only): a live model's outer Jacobian
  eigenvalues (:func:`arnoldi_eigenvalues`), Hutchinson rotational share and
  the update operator's spectral radius at its step sizes, for logging while
  training.
* :func:`run_game` / :func:`run_games` run a transform under ``lax.scan`` and
  record distances against field evaluations ("passes").
* ``plot_*``: matplotlib helpers (eigenvalue clouds, radius heat maps, phase
  portraits, distance curves).
"""

from minmaxlab.analysis._arnoldi import RitzValues, arnoldi_eigenvalues
from minmaxlab.analysis._closed_form import (
  alternating_eigenvalues,
  closed_form_eigenvalues,
  extragradient_eigenvalues,
  gda_eigenvalues,
  lookahead_eigenvalues,
  optimistic_eigenvalues,
  per_step_rate,
  spectral_radius,
)
from minmaxlab.analysis._jacobian import (
  JacobianSummary,
  decompose,
  eigenvalue_angles,
  jacobian,
  jvp_operator,
  summarize_jacobian,
  top_eigenvalues,
  vjp_operator,
)
from minmaxlab.analysis._live import DYNAMICS_SCHEMES, GameDynamics, game_dynamics
from minmaxlab.analysis._plot import (
  plot_distance_curves,
  plot_eigenvalues,
  plot_phase_portrait,
  plot_radius_heatmap,
  plot_radius_vs_step_size,
)
from minmaxlab.analysis._radius_grid import RadiusGrid, spectral_radius_grid
from minmaxlab.analysis._step_sizes import StepSizes, contractive_step_sizes
from minmaxlab.analysis._trajectory import (
  Trajectory,
  field_evaluations_per_step,
  run_game,
  run_games,
)
from minmaxlab.analysis._update_operator import UpdateOperator, update_operator

__all__ = [
  "DYNAMICS_SCHEMES",
  "GameDynamics",
  "JacobianSummary",
  "RadiusGrid",
  "RitzValues",
  "StepSizes",
  "Trajectory",
  "UpdateOperator",
  "alternating_eigenvalues",
  "arnoldi_eigenvalues",
  "closed_form_eigenvalues",
  "contractive_step_sizes",
  "decompose",
  "eigenvalue_angles",
  "extragradient_eigenvalues",
  "field_evaluations_per_step",
  "game_dynamics",
  "gda_eigenvalues",
  "jacobian",
  "jvp_operator",
  "lookahead_eigenvalues",
  "optimistic_eigenvalues",
  "per_step_rate",
  "plot_distance_curves",
  "plot_eigenvalues",
  "plot_phase_portrait",
  "plot_radius_heatmap",
  "plot_radius_vs_step_size",
  "run_game",
  "run_games",
  "spectral_radius",
  "spectral_radius_grid",
  "summarize_jacobian",
  "top_eigenvalues",
  "update_operator",
  "vjp_operator",
]
