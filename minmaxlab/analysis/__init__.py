"""minmaxlab.analysis: game Jacobians and update-operator spectra (under construction)."""

__all__: list[str] = []
