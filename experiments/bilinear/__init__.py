"""Bilinear-game comparison of every game optimizer, with and without lookahead."""
