"""``python -m minmaxlab.pbt worker --workdir DIR``: join a PBT run as a worker.

Start any number of these (``srun -n K``, ``mpirun -n K``, job arrays) next to a
:class:`minmaxlab.pbt.Controller` built with ``external_workers=True``; they
rendez-vous through the run's SQLite store and checkpoints on a shared file
system. A worker exits when the run is finished.
"""

import argparse


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m minmaxlab.pbt")
  sub = parser.add_subparsers(dest="command", required=True)
  w = sub.add_parser("worker", help="claim and run trials of the run in --workdir")
  w.add_argument("--workdir", required=True)
  w.add_argument("--name", default=None, help="worker name (default: pid-based)")
  w.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the controller")
  args = parser.parse_args(argv)
  from minmaxlab.pbt._controller import join_run

  done = join_run(args.workdir, name=args.name, wait_s=args.wait)
  print(f"worker finished: {done} trials")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
