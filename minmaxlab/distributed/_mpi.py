"""The coevolution grid over MPI ranks (``mpi4jax``): one block of cells per rank."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from minmaxlab.distributed._blocks import BlockExchange


def _mpi():
  try:
    import mpi4jax
    from mpi4py import MPI
  except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError(
      f"the MPI backend needs mpi4py and mpi4jax ({e.name or e} is missing): run `python3"
      " dev.py mpi` in the checkout (MPICH, mpi4py and mpi4jax into .venv); in another venv,"
      " activated: `pip install mpich 'mpi4py>=4'` first, then `pip install --no-cache-dir"
      " mpi4jax` (it compiles against that mpicc)"
    ) from e
  return MPI, mpi4jax


def mpi_blocks(size: int, rows: int, cols: int, blocks: tuple[int, int] | None = None):
  """The ``(block_rows, block_cols)`` tiling of a ``rows x cols`` grid over
  ``size`` ranks: ``blocks`` if given, else blocks of whole rows (``(size, 1)``)
  when ``size`` divides ``rows``, else of whole columns; ``ValueError`` when
  nothing fits (raised before any work starts)."""
  if blocks is not None:
    br, bc = (int(b) for b in blocks)
    if br * bc != size:
      raise ValueError(f"mpi blocks {blocks} need {br * bc} ranks, got {size}")
    return br, bc
  if rows % size == 0:
    return size, 1
  if cols % size == 0:
    return 1, size
  raise ValueError(
    f"{size} MPI ranks cannot split a {rows}x{cols} grid: the number of ranks must divide"
    f" the rows ({rows}) or the columns ({cols}), or give 2-D blocks that do"
  )


class MPIExchange(BlockExchange):
  """Each MPI rank owns one block of the grid; halos travel by
  ``mpi4jax.sendrecv`` inside the jitted step (one message per dtype and
  direction), reductions are ``mpi4jax.allreduce``.

  Rank ``k`` owns block ``divmod(k, block_cols)`` (row-major). The state of
  rank ``k`` (``Coevolution.init`` with this exchange) is that block of the
  whole grid's state; :func:`gather_blocks` assembles the whole grid.

  Args:
    rows, cols: the grid.
    comm: an ``mpi4py`` communicator (default ``COMM_WORLD``).
    blocks: ``(block_rows, block_cols)`` with ``block_rows * block_cols`` equal to
      the number of ranks (default: see :func:`mpi_blocks`).
  """

  def __init__(self, rows: int, cols: int, comm=None, blocks: tuple[int, int] | None = None):
    MPI, self._mpi4jax = _mpi()
    self._MPI = MPI
    self.comm = MPI.COMM_WORLD if comm is None else comm
    self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
    super().__init__(rows, cols, mpi_blocks(self.size, rows, cols, blocks))
    bi, bj = divmod(self.rank, self.blocks[1])
    self.block_index = (bi, bj)
    self.local_block = (bi * self.block_shape[0], bj * self.block_shape[1])

  def block_start(self):
    return self.local_block

  def _rank_of(self, bi, bj):
    br, bc = self.blocks
    return (bi % br) * bc + (bj % bc)

  def _from_neighbour(self, edge, axis, direction):
    step = (direction, 0) if axis == 0 else (0, direction)
    bi, bj = self.block_index
    source = self._rank_of(bi + step[0], bj + step[1])
    dest = self._rank_of(bi - step[0], bj - step[1])
    return self._mpi4jax.sendrecv(
      edge, jnp.zeros_like(edge), source=source, dest=dest, comm=self.comm
    )

  def reduce(self, x, op):
    ops = {"min": self._MPI.MIN, "sum": self._MPI.SUM}
    if op not in ops:
      raise ValueError(f"op must be 'min' or 'sum', got {op!r}")
    return self._mpi4jax.allreduce(x, op=ops[op], comm=self.comm)

  def gather_blocks(self, tree):
    """The whole grid (numpy, on every rank) from every rank's block: leaves
    with the block's leading shape are assembled, others (scalars, equal on
    every rank) are taken from this rank."""
    lr, lc = self.block_shape
    br, bc = self.blocks

    def one(x):
      x = np.asarray(x)
      if x.ndim < 2 or x.shape[:2] != (lr, lc):
        return x
      x = np.ascontiguousarray(x)
      out = np.empty((self.size,) + x.shape, x.dtype)
      self.comm.Allgather(x, out)
      out = out.reshape((br, bc) + x.shape)
      out = np.moveaxis(out, 2, 1)  # (br, lr, bc, lc, ...)
      return out.reshape((br * lr, bc * lc) + x.shape[2:])

    return jax.tree.map(one, tree)

  def local(self, tree):
    """This rank's block of a whole-grid pytree (e.g. a restored checkpoint)."""
    (r0, c0), (lr, lc) = self.local_block, self.block_shape

    def one(x):
      if jnp.ndim(x) < 2 or tuple(x.shape[:2]) != (self.rows, self.cols):
        return x
      return x[r0 : r0 + lr, c0 : c0 + lc]

    return jax.tree.map(one, tree)
