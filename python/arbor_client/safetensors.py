"""safetensors read and write with numpy alone (the format Arbor's tree batches and HF checkpoints use).

Layout (https://github.com/huggingface/safetensors): an unsigned 64-bit little-endian header length, a JSON
header ``{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}``, then the tensors'
little-endian bytes. Only the dtypes Arbor writes or reads are supported; anything else is refused by name.
"""
from __future__ import annotations

import json
import struct
from typing import Dict, Mapping, Optional, Tuple, Union

import numpy as np

__all__ = ["read_safetensors", "load_safetensors", "write_safetensors", "save_safetensors", "DTYPES"]

#: safetensors dtype name → numpy dtype (little-endian). BF16 is read as float32 (numpy has no bfloat16).
DTYPES: Dict[str, str] = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}
_NAMES = {np.dtype(v): k for k, v in DTYPES.items()}

#: Largest header accepted (the reference implementation's limit): a corrupt length fails fast.
MAX_HEADER_BYTES = 100_000_000


def read_safetensors(data: Union[bytes, bytearray, memoryview]) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """Parse a safetensors file's bytes into ``(tensors, metadata)``; tensors are copies in native byte order."""
    buf = memoryview(data)
    if len(buf) < 8:
        raise ValueError(f"safetensors: {len(buf)} bytes is too short for the 8-byte header length")
    (n,) = struct.unpack_from("<Q", buf, 0)
    if n > MAX_HEADER_BYTES or 8 + n > len(buf):
        raise ValueError(f"safetensors: header length {n} does not fit the {len(buf)}-byte file")
    header = json.loads(bytes(buf[8 : 8 + n]).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("safetensors: the header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    base = 8 + n
    tensors: Dict[str, np.ndarray] = {}
    for name, info in header.items():
        dtype = info.get("dtype")
        shape = [int(d) for d in info.get("shape", [])]
        begin, end = (int(x) for x in info.get("data_offsets", (0, 0)))
        if not (0 <= begin <= end and base + end <= len(buf)):
            raise ValueError(f"safetensors: tensor '{name}': data_offsets [{begin}, {end}] lie outside the file")
        raw = buf[base + begin : base + end]
        if dtype == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif dtype in DTYPES:
            arr = np.frombuffer(raw, dtype=DTYPES[dtype]).astype(np.dtype(DTYPES[dtype]).newbyteorder("="))
        else:
            raise ValueError(f"safetensors: tensor '{name}': dtype '{dtype}' is not supported (known: {', '.join([*DTYPES, 'BF16'])})")
        count = int(np.prod(shape)) if shape else 1
        if arr.size != count:
            raise ValueError(f"safetensors: tensor '{name}': {arr.size} values for shape {shape}")
        tensors[name] = arr.reshape(shape).copy()
    return tensors, {str(k): str(v) for k, v in metadata.items()}


def load_safetensors(path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """Read a safetensors file from disk: ``(tensors, metadata)``."""
    with open(path, "rb") as f:
        return read_safetensors(f.read())


def write_safetensors(tensors: Mapping[str, np.ndarray], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """Serialise tensors (numpy arrays of a supported dtype) and string metadata to safetensors bytes.

    Tensors are laid out in name order, each 8-byte aligned, the header space-padded to a multiple of 8.
    """
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        key = _NAMES.get(arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype)
        if key is None:
            raise ValueError(f"safetensors: tensor '{name}': numpy dtype {arr.dtype} has no safetensors name")
        raw = arr.astype(DTYPES[key], copy=False).tobytes()
        pad = (-len(raw)) % 8
        header[name] = {"dtype": key, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def save_safetensors(path: str, tensors: Mapping[str, np.ndarray], metadata: Optional[Mapping[str, str]] = None) -> None:
    """Write tensors and metadata to ``path`` as safetensors."""
    with open(path, "wb") as f:
        f.write(write_safetensors(tensors, metadata))
