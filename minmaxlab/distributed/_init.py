"""Start multi-process JAX from one string (a config field or a flag)."""

from __future__ import annotations

import jax


def initialize(spec: str = "") -> bool:
  """Start ``jax.distributed`` as ``spec`` says; call before any JAX computation.

  Args:
    spec: ``""`` (one process: nothing to do), ``"auto"`` (JAX detects the
      cluster: SLURM, Open MPI, TPU pods...), ``"mpi4py"`` (under ``mpirun``: ranks
      and the coordinator from MPI) or ``"<host>:<port>/<num_processes>/<process_id>"``.

  Returns:
    Whether a multi-process job was started.

  Raises:
    ValueError: for a malformed ``spec``.
  """
  spec = (spec or "").strip()
  if not spec:
    return False
  if spec == "auto":
    jax.distributed.initialize()
  elif spec == "mpi4py":
    jax.distributed.initialize(cluster_detection_method="mpi4py")
  else:
    parts = spec.split("/")
    try:
      address, n, i = parts
      n, i = int(n), int(i)
      host, port = address.rsplit(":", 1)
      int(port)
    except ValueError:
      raise ValueError(
        "distributed must be '', 'auto', 'mpi4py' or '<host>:<port>/<num_processes>/"
        f"<process_id>', got {spec!r}"
      ) from None
    if not (n >= 1 and 0 <= i < n and host):
      raise ValueError(
        f"distributed {spec!r}: need num_processes >= 1 and 0 <= process_id < num_processes"
      )
    jax.distributed.initialize(address, num_processes=n, process_id=i)
  return True
