"""minmaxlab.runner: the I/O edge (checkpoints, logs, progress, plots) (under construction)."""

__all__: list[str] = []
