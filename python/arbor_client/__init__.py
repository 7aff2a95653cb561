"""arbor_client: a Python client of Arbor's trainer protocol (docs/trainers.md).

Standard library and numpy only; pyarrow is used when present (Arrow batches), torch only by the reference
trainer (``python -m arbor_client.train_worker``).
"""
__version__ = "0.1.0"
