"""The fixtures live in b10test.py, so that tests/gpu uses the same ones."""
from b10test import daemons, ranks  # noqa: F401 (pytest finds fixtures by name)
