"""One training batch as numpy arrays: the packed prefix tree of docs/batch-schema.md, read from either wire format.

``Batch.from_safetensors`` reads the ``arbor.tree.v2`` file (``GET /v1/batches/next?format=safetensors``) with
numpy alone. ``Batch.from_arrow`` reads the ``arbor.batch.v1`` Arrow file (one row per token) with pyarrow and
rebuilds the *same tree arrays* from it: each row names its tree ``node`` and ``parent``, and a row with
``loss_mask`` 1 is a loss term whose predictor is the previous row's node (the tree builder's own rule,
src/batch/tree/build-tree.ts), with advantages, logprobs and weights rounded to float32 as the tree stores
them. So both formats of one batch give equal ``Batch`` objects (``Batch.equals``).

Tree convention (src/batch/tree/packed-tree.ts): term ``j`` says "the logits at node ``term_node[j]`` predict
token ``term_target[j]``, which is token ``term_token[j]`` of sample ``term_sample[j]``".
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from .safetensors import read_safetensors

__all__ = ["Batch", "FlatSample", "BatchFormatError", "TREE_SCHEMA", "ARROW_SCHEMA"]

#: Schema of the safetensors tree file this reader understands.
TREE_SCHEMA = "arbor.tree.v2"
#: Schema of the Arrow file this reader understands.
ARROW_SCHEMA = "arbor.batch.v1"

_INT_TENSORS = ("tokens", "parents", "positions", "term_node", "term_target", "term_sample", "term_unit", "term_token", "sample_offsets", "sample_paths")
_FLOAT_TENSORS = ("term_advantage", "term_old_logprob", "term_weight")
_ARRAYS = _INT_TENSORS + _FLOAT_TENSORS


class BatchFormatError(ValueError):
    """A batch file that is not what its schema says: names the file kind, the field and what is wrong."""


@dataclass
class FlatSample:
    """One sample as a flat sequence: per token position, its id and the loss inputs of the term that predicts it.

    ``loss_mask`` is 1 exactly where a term targets the token (model-generated tokens); ``advantage``,
    ``old_logprob`` and ``weight`` are 0 and ``unit`` is -1 elsewhere.
    """

    tokens: np.ndarray  # int32[n]
    loss_mask: np.ndarray  # int32[n]
    advantage: np.ndarray  # float32[n]
    old_logprob: np.ndarray  # float32[n]
    weight: np.ndarray  # float32[n]
    unit: np.ndarray  # int32[n], ratio unit of the term targeting the token, -1 where none


@dataclass
class Batch:
    """A training batch: the packed prefix tree (int32 / float32 numpy arrays) plus its loss spec and samples.

    ``samples[i]`` is the ``arbor.samples`` entry of sample ``i`` (``id``, ``programId``, ``groupId``, ``taskId``,
    ``callIds``, ``segment``); ``programs`` the ``arbor.programs`` outcomes when the batch carries them.
    """

    batch_id: str
    loss: Dict[str, Any]
    tokens: np.ndarray
    parents: np.ndarray
    positions: np.ndarray
    term_node: np.ndarray
    term_target: np.ndarray
    term_sample: np.ndarray
    term_unit: np.ndarray
    term_token: np.ndarray
    term_advantage: np.ndarray
    term_old_logprob: np.ndarray
    term_weight: np.ndarray
    sample_offsets: np.ndarray
    sample_paths: np.ndarray
    samples: List[Dict[str, Any]]
    tree_stats: Dict[str, Any] = field(default_factory=dict)
    programs: Optional[List[Dict[str, Any]]] = None

    def __post_init__(self) -> None:
        for name in _INT_TENSORS:
            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=np.int32))
        for name in _FLOAT_TENSORS:
            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=np.float32))
        self._check()

    # ----------------------------------------------------------------------------------------------- readers

    @classmethod
    def from_safetensors(cls, data: bytes) -> "Batch":
        """Read an ``arbor.tree.v2`` safetensors file's bytes (as served with ``?format=safetensors``)."""
        try:
            tensors, meta = read_safetensors(data)
        except ValueError as e:
            raise BatchFormatError(f"safetensors batch: {e}") from e
        schema = meta.get("arbor.schema")
        if schema != TREE_SCHEMA:
            raise BatchFormatError(f"safetensors batch: schema is '{schema}', this reader understands '{TREE_SCHEMA}'")
        arrays: Dict[str, np.ndarray] = {}
        for name in _ARRAYS:
            if name not in tensors:
                raise BatchFormatError(f"safetensors batch: missing tensor '{name}'")
            want = np.int32 if name in _INT_TENSORS else np.float32
            if tensors[name].dtype != want or tensors[name].ndim != 1:
                raise BatchFormatError(f"safetensors batch: tensor '{name}' is {tensors[name].dtype}{list(tensors[name].shape)}, {schema} stores it as 1-D {np.dtype(want)}")
            arrays[name] = tensors[name]
        samples = _meta_json(meta, "arbor.samples", "safetensors batch")
        if samples is None:
            # A file written to disk by writeTreeSafetensors has no sample metadata: name the samples by index.
            samples = [{"id": str(i)} for i in range(len(arrays["sample_offsets"]) - 1)]
        return cls(
            batch_id=meta.get("arbor.batch_id", ""),
            loss=_meta_json(meta, "arbor.loss", "safetensors batch", required=True),
            samples=samples,
            tree_stats=_meta_json(meta, "arbor.tree_stats", "safetensors batch") or {},
            programs=_meta_json(meta, "arbor.programs", "safetensors batch"),
            **arrays,
        )

    @classmethod
    def from_arrow(cls, data: bytes) -> "Batch":
        """Read an ``arbor.batch.v1`` Arrow IPC file's bytes and rebuild the tree arrays (needs pyarrow)."""
        try:
            import pyarrow as pa  # imported here: the client itself needs numpy only
            import pyarrow.ipc as ipc
        except ImportError as e:
            raise ImportError("Batch.from_arrow needs pyarrow (pip install pyarrow); or ask the server for format='safetensors', which needs numpy only") from e
        try:
            table = ipc.open_file(pa.BufferReader(data)).read_all()
        except (pa.ArrowInvalid, OSError) as e:
            raise BatchFormatError(f"arrow batch: not an Arrow IPC file: {e}") from e
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        schema = meta.get("arbor.schema")
        if schema != ARROW_SCHEMA:
            raise BatchFormatError(f"arrow batch: schema is '{schema}', this reader understands '{ARROW_SCHEMA}'")

        def col(name: str, dtype: Any) -> np.ndarray:
            if name not in table.column_names:
                raise BatchFormatError(f"arrow batch: missing column '{name}'")
            return np.asarray(table.column(name).to_numpy(), dtype=dtype)

        sample = col("sample", np.int64)
        token_index = col("token_index", np.int64)
        token_id = col("token_id", np.int32)
        node = col("node", np.int64)
        parent = col("parent", np.int32)
        position = col("position", np.int32)
        loss_mask = col("loss_mask", np.int64)
        unit = col("unit", np.int32)
        samples = _meta_json(meta, "arbor.samples", "arrow batch", required=True)
        n_samples = len(samples)
        rows = len(sample)
        if rows and (sample.min() < 0 or sample.max() >= n_samples):
            raise BatchFormatError(f"arrow batch: a row names sample {int(sample.max() if sample.max() >= n_samples else sample.min())}, the metadata has {n_samples} samples")
        if rows > 1 and np.any(np.diff(sample) < 0):
            raise BatchFormatError("arrow batch: rows are not in sample order")
        counts = np.bincount(sample, minlength=n_samples)
        offsets = np.zeros(n_samples + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        expected_index = np.arange(rows, dtype=np.int64) - offsets[sample]
        bad = np.nonzero(token_index != expected_index)[0]
        if len(bad):
            r = int(bad[0])
            raise BatchFormatError(f"arrow batch: row {r}: token_index {int(token_index[r])} out of order in sample {int(sample[r])}")
        n_nodes = int(node.max()) + 1 if rows else 0
        tokens = np.full(n_nodes, -1, dtype=np.int32)
        parents = np.zeros(n_nodes, dtype=np.int32)
        positions = np.zeros(n_nodes, dtype=np.int32)
        # Rows sharing a node are one shared prefix token: any of them gives the node's id, parent and position.
        tokens[node] = token_id
        parents[node] = parent
        positions[node] = position
        if np.any(tokens < 0):
            raise BatchFormatError(f"arrow batch: node {int(np.argmax(tokens < 0))} is on no sample's path")
        term_rows = np.nonzero(loss_mask == 1)[0]
        first = term_rows[token_index[term_rows] == 0]
        if len(first):
            raise BatchFormatError(f"arrow batch: row {int(first[0])}: loss_mask is 1 on the first token of sample {int(sample[first[0]])}, which nothing predicts")
        return cls(
            batch_id=meta.get("arbor.batch_id", ""),
            loss=_meta_json(meta, "arbor.loss", "arrow batch", required=True),
            tokens=tokens,
            parents=parents,
            positions=positions,
            term_node=node[term_rows - 1],
            term_target=token_id[term_rows],
            term_sample=sample[term_rows],
            term_unit=unit[term_rows],
            term_token=token_index[term_rows],
            term_advantage=col("advantage", np.float64)[term_rows].astype(np.float32),
            term_old_logprob=col("old_logprob", np.float64)[term_rows].astype(np.float32),
            term_weight=col("weight", np.float64)[term_rows].astype(np.float32),
            sample_offsets=offsets,
            sample_paths=node,
            samples=samples,
            tree_stats=_meta_json(meta, "arbor.tree_stats", "arrow batch") or {},
            programs=_meta_json(meta, "arbor.programs", "arrow batch"),
        )

    # ----------------------------------------------------------------------------------------------- views

    @property
    def num_samples(self) -> int:
        """Number of samples in the batch."""
        return len(self.sample_offsets) - 1

    @property
    def num_terms(self) -> int:
        """Number of loss terms (model tokens after each sample's first)."""
        return len(self.term_node)

    def sample_path(self, i: int) -> np.ndarray:
        """Tree node of each token of sample ``i``."""
        if not 0 <= i < self.num_samples:
            raise IndexError(f"sample {i}: the batch has {self.num_samples} samples")
        return self.sample_paths[self.sample_offsets[i] : self.sample_offsets[i + 1]]

    def sample_tokens(self, i: int) -> np.ndarray:
        """Token ids of sample ``i`` (int32), read through its path in the tree."""
        return self.tokens[self.sample_path(i)]

    def flat(self) -> List[FlatSample]:
        """Every sample as a flat sequence with per-token loss inputs, rebuilt from the tree's terms."""
        n = len(self.sample_paths)
        flat_index = self.sample_offsets[self.term_sample].astype(np.int64) + self.term_token
        loss_mask = np.zeros(n, dtype=np.int32)
        advantage = np.zeros(n, dtype=np.float32)
        old_logprob = np.zeros(n, dtype=np.float32)
        weight = np.zeros(n, dtype=np.float32)
        unit = np.full(n, -1, dtype=np.int32)
        loss_mask[flat_index] = 1
        advantage[flat_index] = self.term_advantage
        old_logprob[flat_index] = self.term_old_logprob
        weight[flat_index] = self.term_weight
        unit[flat_index] = self.term_unit
        tokens = self.tokens[self.sample_paths]
        out = []
        for i in range(self.num_samples):
            a, b = int(self.sample_offsets[i]), int(self.sample_offsets[i + 1])
            out.append(FlatSample(tokens[a:b], loss_mask[a:b], advantage[a:b], old_logprob[a:b], weight[a:b], unit[a:b]))
        return out

    def equals(self, other: "Batch") -> bool:
        """Whether two batches hold the same id, loss, samples and bit-identical arrays."""
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray):
                if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    # ----------------------------------------------------------------------------------------------- checks

    def _check(self) -> None:
        """Refuse inconsistent arrays with an error naming the field (a trainer must never index out of range)."""
        n_nodes = len(self.tokens)
        for name in ("parents", "positions"):
            if len(getattr(self, name)) != n_nodes:
                raise BatchFormatError(f"batch {self.batch_id}: {name} has {len(getattr(self, name))} entries for {n_nodes} nodes")
        n_terms = len(self.term_node)
        for name in ("term_target", "term_sample", "term_unit", "term_token", "term_advantage", "term_old_logprob", "term_weight"):
            if len(getattr(self, name)) != n_terms:
                raise BatchFormatError(f"batch {self.batch_id}: {name} has {len(getattr(self, name))} entries for {n_terms} terms")
        off = self.sample_offsets
        if len(off) < 1 or off[0] != 0 or off[-1] != len(self.sample_paths) or np.any(np.diff(off) < 0):
            raise BatchFormatError(f"batch {self.batch_id}: sample_offsets must rise from 0 to the {len(self.sample_paths)} entries of sample_paths")
        if len(self.samples) != len(off) - 1:
            raise BatchFormatError(f"batch {self.batch_id}: samples metadata lists {len(self.samples)} samples, sample_offsets {len(off) - 1}")
        for name, arr, hi in (("sample_paths", self.sample_paths, n_nodes), ("term_node", self.term_node, n_nodes), ("term_sample", self.term_sample, len(off) - 1)):
            if len(arr) and (arr.min() < 0 or arr.max() >= hi):
                raise BatchFormatError(f"batch {self.batch_id}: {name} holds an index outside [0, {hi})")
        if n_nodes and (np.any(self.parents >= np.arange(n_nodes)) or self.parents.min() < -1):
            raise BatchFormatError(f"batch {self.batch_id}: parents must precede their children (DFS pre-order), -1 for roots")
        if n_terms:
            lengths = np.diff(off)[self.term_sample]
            if np.any(self.term_token < 1) or np.any(self.term_token >= lengths):
                raise BatchFormatError(f"batch {self.batch_id}: term_token must lie in [1, sample length)")
            at = off[self.term_sample].astype(np.int64) + self.term_token
            if not np.array_equal(self.tokens[self.sample_paths[at]], self.term_target):
                raise BatchFormatError(f"batch {self.batch_id}: term_target differs from the sample's token at term_token")
            if not np.array_equal(self.sample_paths[at - 1], self.term_node):
                raise BatchFormatError(f"batch {self.batch_id}: term_node is not the node of the token before the target")


def _meta_json(meta: Mapping[str, str], key: str, what: str, required: bool = False) -> Any:
    raw = meta.get(key)
    if raw is None:
        if required:
            raise BatchFormatError(f"{what}: missing metadata '{key}'")
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise BatchFormatError(f"{what}: metadata '{key}' is not JSON: {e}") from e
