"""``minmaxlab.runner``: the I/O edge for experiments.

Atomic orbax checkpoints (:class:`CheckpointManager`), metrics to JSONL and
TensorBoard (:class:`MetricWriter`; :class:`EventFileWriter` over tensorboardX),
a live :class:`ProgressBar`, and PNG plots (sample grids, 2-D scatter, metric
curves), the life of a run from the command line (reruns, Ctrl-C, the finish rule:
:func:`finish`/:func:`is_finished`), one training run's files in the order a train
loop uses them (:class:`TrainingRun`) and the workdir lock. The library itself never
touches disk except through this package.
"""

from minmaxlab.runner._cache_folder import compilation_cache_dir, enable_compilation_cache
from minmaxlab.runner._checkpoint import CheckpointManager
from minmaxlab.runner._compile_cache import program_cache
from minmaxlab.runner._finish import (
  checkpoint_product,
  checkpoint_steps,
  fault_point,
  finish,
  is_finished,
  saved_summary,
  write_json,
)
from minmaxlab.runner._host import cpu_has_avx512, cpu_model
from minmaxlab.runner._lifecycle import (
  config_changes,
  exit_on_interrupt,
  finished_run,
  interrupted_line,
  report_compilation,
  rerun_command,
  run_record,
  run_status,
  start_run,
  write_config,
)
from minmaxlab.runner._load import Run, load_run
from minmaxlab.runner._metrics_log import MetricWriter, read_jsonl
from minmaxlab.runner._plots import image_grid, save_image_grid, save_metric_curves, save_scatter
from minmaxlab.runner._program_key import program_key
from minmaxlab.runner._progress import ProgressBar
from minmaxlab.runner._stored_programs import StoredProgram, stored_program
from minmaxlab.runner._tensorboard import EventFileWriter, read_events, read_scalars
from minmaxlab.runner._training_run import TrainingRun
from minmaxlab.runner._workdir_lock import WorkdirBusy, lock_workdir, unlock_workdir, workdir_lock

__all__ = [
  "CheckpointManager",
  "EventFileWriter",
  "MetricWriter",
  "ProgressBar",
  "Run",
  "StoredProgram",
  "TrainingRun",
  "WorkdirBusy",
  "checkpoint_product",
  "checkpoint_steps",
  "compilation_cache_dir",
  "config_changes",
  "cpu_has_avx512",
  "cpu_model",
  "enable_compilation_cache",
  "exit_on_interrupt",
  "fault_point",
  "finish",
  "finished_run",
  "image_grid",
  "interrupted_line",
  "is_finished",
  "load_run",
  "lock_workdir",
  "program_cache",
  "program_key",
  "read_events",
  "read_jsonl",
  "read_scalars",
  "report_compilation",
  "rerun_command",
  "run_record",
  "run_status",
  "save_image_grid",
  "save_metric_curves",
  "save_scatter",
  "saved_summary",
  "start_run",
  "stored_program",
  "unlock_workdir",
  "workdir_lock",
  "write_config",
  "write_json",
]
