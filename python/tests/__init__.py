"""Tests of arbor_client (run: python3 -m unittest discover -s python/tests -t python)."""
