"""Spatial coevolution of GANs (Lipizzaner in JAX): the project's main demo."""
