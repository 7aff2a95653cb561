"""arbor_client: a Python client of Arbor's trainer protocol (docs/trainers.md).

Standard library and numpy only; pyarrow is used when present (Arrow batches), torch only by the reference
trainer (``python -m arbor_client.train_worker``).
"""
from .adapters import split_samples, to_slime, to_trl, to_verl
from .batch import Batch, BatchFormatError, FlatSample
from .client import METRICS, TrainerClient, TrainerProtocolError
from .loop import LoopSummary, train_loop

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "BatchFormatError",
    "FlatSample",
    "LoopSummary",
    "METRICS",
    "TrainerClient",
    "TrainerProtocolError",
    "split_samples",
    "to_slime",
    "to_trl",
    "to_verl",
    "train_loop",
]
