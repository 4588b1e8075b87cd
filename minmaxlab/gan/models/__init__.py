"""minmaxlab.gan.models (under construction)."""

__all__: list[str] = []
