"""Side by side with the original implementations: golden files recorded by running the
reference code (a checkout given on the command line) on inputs made here, and what they
compare (README.md)."""
