"""minmaxlab.gan.metrics (under construction)."""

__all__: list[str] = []
