"""Runnable studies: each ``<name>/main.py`` parses flags and calls a testable ``train``."""
