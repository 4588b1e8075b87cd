"""Cells over cores: one CPU device per usable core, the grid's cells sharded over them.

XLA's CPU client has one intra-op thread pool for all its devices (as many threads as the
cores it may use, and at least one per device) and splits every large enough op over it.
:func:`split_cpu_cores` starts the CPU client with one device per core, so that cells
sharded over those devices (``make_backend(config, "auto")``) run side by side, as
Lipizzaner's clients do, with a ``mesh``'s numbers: one device's to float rounding, every
discrete choice equal. The devices share the pool: a device is not a thread of its own (a
process with one thread runs other bits: ``experiments/benchmarks/past_the_floor.py``'s
one-thread arm is a cost reference, not a bit-equal option).
"""

from __future__ import annotations

import importlib.util
import os

import jax

_SPLIT: list[int] = []  # the device count split_cpu_cores gave this process, once it did
_GPU_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin")


def _user_fixed_devices() -> bool:
  flags = os.environ.get("XLA_FLAGS", "")
  return (
    "JAX_NUM_CPU_DEVICES" in os.environ
    or "xla_force_host_platform_device_count" in flags
    or jax.config.jax_num_cpu_devices >= 0
  )


def _accelerator_possible() -> bool:
  platforms = (os.environ.get("JAX_PLATFORMS") or jax.config.jax_platforms or "").lower()
  if platforms:
    return platforms.split(",")[0].strip() != "cpu"
  return any(importlib.util.find_spec(p) is not None for p in _GPU_PLUGINS)


def grid_split(rows: int, cols: int, devices: int) -> tuple[int, int]:
  """The mesh ``(a, b)`` with ``a`` dividing ``rows``, ``b`` dividing ``cols`` and the most
  devices ``a * b <= devices`` (ties: more mesh rows, i.e. blocks of whole grid rows).

  Raises:
    ValueError: unless ``rows``, ``cols`` and ``devices`` are at least 1.
  """
  if min(rows, cols, devices) < 1:
    raise ValueError(f"grid_split needs rows, cols, devices >= 1, got {(rows, cols, devices)}")
  fits = [(a * b, a, b) for a in range(1, rows + 1) for b in range(1, cols + 1)]
  _, a, b = max(f for f in fits if rows % f[1] == 0 and cols % f[2] == 0 and f[0] <= devices)
  return a, b


def split_cpu_cores(cores: int | None = None, grid: tuple[int, int] | None = None) -> int:
  """Start JAX's CPU client with one device per core; call before anything starts JAX's
  backends (the first array, ``jax.devices()``, a compile).

  Nothing changes (and ``0`` is returned) when the backends have already started, when the
  CPU device count was fixed by the user (``JAX_NUM_CPU_DEVICES``, ``jax_num_cpu_devices``,
  ``--xla_force_host_platform_device_count``), when an accelerator may be the default
  platform (a GPU plugin installed and ``JAX_PLATFORMS`` not ``cpu``), with one core, or
  when ``grid``'s cells cannot fill every core (its rows and columns do not split into
  ``cores`` blocks: a 3x3 grid on 2 cores keeps one device and XLA's threads).

  Args:
    cores: devices to make (default: the cores this process may run on,
      ``os.sched_getaffinity``).
    grid: ``(rows, cols)`` of the grid to run (default: split regardless).

  Returns:
    The number of CPU devices made, or ``0`` when nothing was changed.
  """
  if _SPLIT:
    return _SPLIT[0]
  allowed = sorted(os.sched_getaffinity(0))
  n = len(allowed) if cores is None else int(cores)
  if n < 2 or _user_fixed_devices() or _accelerator_possible():
    return 0
  if grid is not None:
    if min(int(grid[0]), int(grid[1])) < 1:  # not a grid: the run's own check says so
      return 0
    a, b = grid_split(int(grid[0]), int(grid[1]), n)
    if a * b != n:
      return 0
  try:
    jax.config.update("jax_num_cpu_devices", n)
  except RuntimeError:  # JAX refuses: its backends have started
    return 0
  jax.devices("cpu")
  _SPLIT.append(n)
  return n


def cores_split() -> int:
  """The device count :func:`split_cpu_cores` made in this process (``0``: it did not)."""
  return _SPLIT[0] if _SPLIT else 0
