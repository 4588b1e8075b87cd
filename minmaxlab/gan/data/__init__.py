"""minmaxlab.gan.data (under construction)."""

__all__: list[str] = []
