"""Hugging Face checkpoint directories as torch tensors: what ``arbor hf export`` writes, read back; and the
same layout written again (``config.json``, ``model.safetensors`` in F32, the tokenizer and generation files
copied from the source directory) so that ``arbor hf convert`` turns a trained checkpoint into a GGUF the
engines serve. Tensors keep their Hugging Face names and row order (q/k rows in HF's RoPE order).

Uses the numpy safetensors module of this package, so no ``safetensors``/``transformers`` install is needed.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

import numpy as np
import torch

from .safetensors import load_safetensors, write_safetensors

__all__ = ["HfCheckpoint", "load_hf_checkpoint", "save_hf_checkpoint", "COPIED_FILES", "MODEL_TYPES"]

#: Files copied unchanged from the source checkpoint when one is written (those present).
COPIED_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "generation_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "tokenizer.model",
)

#: ``config.json`` model types the torch llama implements (``arbor hf convert`` handles the same two).
MODEL_TYPES = ("llama", "qwen2")


@dataclass
class HfCheckpoint:
    """A checkpoint directory's ``config.json`` and weights (by Hugging Face tensor name)."""

    dir: str
    config: Dict[str, object]
    tensors: Dict[str, torch.Tensor]


def _read_json(path: str, why: str) -> Dict[str, object]:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: missing ({why})")
    with open(path, "r", encoding="utf-8") as f:
        try:
            value = json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(value, dict):
        raise ValueError(f"{path}: must be a JSON object")
    return value


def _weight_files(dir: str) -> List[str]:
    single = os.path.join(dir, "model.safetensors")
    index = os.path.join(dir, "model.safetensors.index.json")
    if os.path.exists(index):
        weight_map = _read_json(index, "").get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ValueError(f"{index}: weight_map must map tensor names to file names")
        return sorted(set(weight_map.values()))
    if os.path.exists(single):
        return ["model.safetensors"]
    raise FileNotFoundError(f"{dir}: no model.safetensors or model.safetensors.index.json (only safetensors weights are supported)")


def load_hf_checkpoint(dir: str, dtype: torch.dtype = torch.float32) -> HfCheckpoint:
    """Read ``dir`` (config.json + model.safetensors, or its shards) into tensors of ``dtype``.

    F32, F16 and BF16 weights are widened exactly; a model type other than llama/qwen2, a quantized checkpoint
    or a tensor stored twice is an error naming the file.
    """
    if not os.path.isdir(dir):
        raise NotADirectoryError(f"{dir}: not a directory (a Hugging Face checkpoint is a directory with config.json)")
    config_path = os.path.join(dir, "config.json")
    config = _read_json(config_path, "a Hugging Face checkpoint needs config.json")
    model_type = config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ValueError(f"{config_path}: model_type '{model_type}' is not supported (supported: {', '.join(MODEL_TYPES)})")
    if isinstance(config.get("quantization_config"), dict):
        raise ValueError(f"{config_path}: a quantized checkpoint; only F32, F16 and BF16 weights are supported")
    tensors: Dict[str, torch.Tensor] = {}
    for name in _weight_files(dir):
        path = os.path.join(dir, name)
        arrays, _ = load_safetensors(path)
        for key, arr in arrays.items():
            if arr.dtype.kind != "f":
                raise ValueError(f"{path}: tensor {key} has dtype {arr.dtype}; only floating-point weights are supported")
            if key in tensors:
                raise ValueError(f"{path}: tensor {key} is stored twice")
            tensors[key] = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)).to(dtype)
    return HfCheckpoint(dir=dir, config=config, tensors=tensors)


def save_hf_checkpoint(
    out_dir: str,
    config: Mapping[str, object],
    tensors: Mapping[str, torch.Tensor],
    source_dir: Optional[str] = None,
) -> str:
    """Write a checkpoint directory ``out_dir`` (created if missing) and return its path.

    ``model.safetensors`` holds every tensor as F32 (metadata ``format: pt``, as ``arbor hf export`` writes);
    the tokenizer/generation files of ``source_dir`` are copied unchanged; ``config.json`` is written last and
    unchanged, so a directory that has it is complete. Each file is written to a temporary name and renamed.
    """
    os.makedirs(out_dir, exist_ok=True)
    arrays = {name: t.detach().to(torch.float32).cpu().contiguous().numpy() for name, t in tensors.items()}
    _write_atomic(os.path.join(out_dir, "model.safetensors"), write_safetensors(arrays, {"format": "pt"}))
    if source_dir is not None:
        for name in COPIED_FILES:
            src = os.path.join(source_dir, name)
            if os.path.exists(src) and os.path.abspath(src) != os.path.abspath(os.path.join(out_dir, name)):
                tmp = os.path.join(out_dir, f".{name}.tmp")
                shutil.copyfile(src, tmp)
                os.replace(tmp, os.path.join(out_dir, name))
    text = json.dumps(dict(config), indent=2) + "\n"
    _write_atomic(os.path.join(out_dir, "config.json"), text.encode("utf-8"))
    return out_dir


def _write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
