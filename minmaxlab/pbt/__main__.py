"""``python -m minmaxlab.pbt worker --workdir DIR``: join a PBT run as a worker.

Start any number of these (``srun -n K``, ``mpirun -n K``, job arrays) next to a
:class:`minmaxlab.pbt.Controller` built with ``external_workers=True``; they
rendez-vous through the run's SQLite store and checkpoints on a shared file
system. Start them from a folder you trust, never from inside a run's folder (or with
``python -P``, as the local workers are): Python looks up every module, ``minmaxlab``
itself included, in the current folder first. The store names the task
(``"module:function"`` + JSON arguments); the worker imports it, so it runs only code
installed where it runs. A worker exits when the run is finished or when the controller's
heartbeat stops.
"""

import argparse
import os
import sys


def _drop_run_paths(workdir: str) -> None:
  """Leave every ``sys.path`` entry inside ``workdir`` (e.g. the current directory of a worker
  started there) out for good, so that no module imported from here on (the task, orbax and
  its dependencies) is looked up in the run's folder. ``minmaxlab`` itself was found before
  this runs: start a worker with ``python -P`` where its current directory is not trusted."""
  folder = os.path.realpath(os.path.expanduser(workdir))

  def inside(p: str) -> bool:
    p = os.path.realpath(p or os.curdir)
    return p == folder or p.startswith(folder.rstrip(os.sep) + os.sep)

  sys.path[:] = [p for p in sys.path if not inside(p)]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m minmaxlab.pbt")
  sub = parser.add_subparsers(dest="command", required=True)
  w = sub.add_parser("worker", help="claim and run trials of the run in --workdir")
  w.add_argument("--workdir", required=True)
  w.add_argument("--name", default=None, help="worker name (default: pid-based)")
  w.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the controller")
  w.add_argument("--epoch", default=None, help=argparse.SUPPRESS)  # set by a local controller
  w.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  _drop_run_paths(args.workdir)
  from minmaxlab.pbt._worker import die_with_parent

  if args.parent_pid is not None:
    die_with_parent(args.parent_pid)  # a local worker ends with its controller
  from minmaxlab.pbt._store import ControllerGone
  from minmaxlab.pbt._worker import ORPHAN_EXIT, join_run

  try:
    done = join_run(args.workdir, name=args.name, wait_s=args.wait, epoch=args.epoch)
  except ControllerGone as e:
    print(f"pbt worker: {e}; exiting", file=sys.stderr)
    return ORPHAN_EXIT
  except (ValueError, TimeoutError) as e:
    if os.environ.get("MINMAXLAB_DEBUG"):
      raise
    print(f"ERROR: {e}", file=sys.stderr)
    return 2
  if args.epoch is None:
    print(f"worker finished: {done} trials")
  return 0


if __name__ == "__main__":
  try:
    raise SystemExit(main())
  except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the controller says
    raise SystemExit(130) from None  # what happened and how to continue, workers stay quiet
