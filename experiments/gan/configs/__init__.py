"""Configuration files for ``experiments.gan`` (each defines ``get_config()``)."""
