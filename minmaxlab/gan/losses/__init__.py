"""minmaxlab.gan.losses (under construction)."""

__all__: list[str] = []
