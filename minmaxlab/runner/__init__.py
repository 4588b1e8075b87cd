"""``minmaxlab.runner``: the I/O edge for experiments.

Atomic orbax checkpoints (:class:`CheckpointManager`), metrics to JSONL and
TensorBoard (:class:`MetricWriter`, a protobuf-free :class:`EventFileWriter`),
a live :class:`ProgressBar`, and PNG plots (sample grids, 2-D scatter, metric
curves). The library itself never touches disk except through this package.
"""

from minmaxlab.runner._checkpoint import CheckpointManager
from minmaxlab.runner._lifecycle import (
  checkpoint_steps,
  compilation_cache_dir,
  config_changes,
  enable_compilation_cache,
  exit_on_interrupt,
  finished_run,
  interrupted_line,
  report_compilation,
  rerun_command,
  run_status,
  start_run,
)
from minmaxlab.runner._metrics_log import MetricWriter, read_jsonl
from minmaxlab.runner._plots import image_grid, save_image_grid, save_metric_curves, save_scatter
from minmaxlab.runner._program_key import program_key
from minmaxlab.runner._progress import ProgressBar
from minmaxlab.runner._tfevents import EventFileWriter, crc32c, read_scalars

__all__ = [
  "CheckpointManager",
  "EventFileWriter",
  "MetricWriter",
  "ProgressBar",
  "checkpoint_steps",
  "compilation_cache_dir",
  "config_changes",
  "enable_compilation_cache",
  "exit_on_interrupt",
  "finished_run",
  "interrupted_line",
  "report_compilation",
  "rerun_command",
  "run_status",
  "start_run",
  "crc32c",
  "image_grid",
  "program_key",
  "read_jsonl",
  "read_scalars",
  "save_image_grid",
  "save_metric_curves",
  "save_scatter",
]
