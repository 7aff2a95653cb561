"""Fixtures of the torch trainer's tests: a tiny random llama checkpoint in the layout ``arbor hf export`` writes,
and a hand-made prefix-tree batch (two samples sharing a prefix) with the tree safetensors' tensor names.
"""
from __future__ import annotations

import json
import os
import types
from typing import Dict, Optional

import numpy as np

from arbor_client.safetensors import save_safetensors

#: The tiny model: 2 layers, 4 query heads over 2 KV heads (GQA), head_dim 4.
CONFIG: Dict[str, object] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 16,
    "intermediate_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 4,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000,
    "rope_scaling": None,
    "max_position_embeddings": 64,
    "vocab_size": 12,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}


def tiny_tensors(seed: int = 0, tied: bool = False) -> Dict[str, np.ndarray]:
    """Random weights (std 0.3, norms around 1) for :data:`CONFIG`, by Hugging Face name."""
    rng = np.random.default_rng(seed)
    h, ff, v, hd = 16, 24, 12, 4
    out: Dict[str, np.ndarray] = {"model.embed_tokens.weight": rng.normal(0, 0.3, (v, h)), "model.norm.weight": 1 + 0.1 * rng.normal(size=h)}
    if not tied:
        out["lm_head.weight"] = rng.normal(0, 0.3, (v, h))
    for l in range(2):
        p = f"model.layers.{l}."
        out.update(
            {
                f"{p}input_layernorm.weight": 1 + 0.1 * rng.normal(size=h),
                f"{p}self_attn.q_proj.weight": rng.normal(0, 0.3, (4 * hd, h)),
                f"{p}self_attn.k_proj.weight": rng.normal(0, 0.3, (2 * hd, h)),
                f"{p}self_attn.v_proj.weight": rng.normal(0, 0.3, (2 * hd, h)),
                f"{p}self_attn.o_proj.weight": rng.normal(0, 0.3, (h, 4 * hd)),
                f"{p}post_attention_layernorm.weight": 1 + 0.1 * rng.normal(size=h),
                f"{p}mlp.gate_proj.weight": rng.normal(0, 0.3, (ff, h)),
                f"{p}mlp.up_proj.weight": rng.normal(0, 0.3, (ff, h)),
                f"{p}mlp.down_proj.weight": rng.normal(0, 0.3, (h, ff)),
            }
        )
    return {k: np.asarray(a, dtype=np.float32) for k, a in out.items()}


def write_tiny_checkpoint(dir: str, seed: int = 0, tied: bool = False, config: Optional[Dict[str, object]] = None) -> str:
    """A checkpoint directory (config.json, model.safetensors, a stand-in tokenizer.json) at ``dir``."""
    os.makedirs(dir, exist_ok=True)
    cfg = dict(config or CONFIG, tie_word_embeddings=tied)
    save_safetensors(os.path.join(dir, "model.safetensors"), tiny_tensors(seed, tied), {"format": "pt"})
    with open(os.path.join(dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump({"model": {"type": "BPE"}, "stand_in": True}, f)
    with open(os.path.join(dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    return dir


def tiny_batch(loss: object, advantage=(1.0, 1.0, -1.0), weight=(0.25, 0.25, 0.5), old=(-2.5, -2.4, -2.6)) -> types.SimpleNamespace:
    """Samples A = [3, 4, 5, 6] and B = [3, 4, 7] as a packed tree (nodes 3 4 5 6 | 7, B forking after 4), with a
    term on every token from position 2: (node 1 → 5), (node 2 → 6) of A and (node 1 → 7) of B."""
    i32 = lambda xs: np.asarray(xs, dtype=np.int32)  # noqa: E731
    f32 = lambda xs: np.asarray(xs, dtype=np.float32)  # noqa: E731
    return types.SimpleNamespace(
        batch_id="tiny",
        loss=loss,
        tokens=i32([3, 4, 5, 6, 7]),
        parents=i32([-1, 0, 1, 2, 1]),
        positions=i32([0, 1, 2, 3, 2]),
        term_node=i32([1, 2, 1]),
        term_target=i32([5, 6, 7]),
        term_sample=i32([0, 0, 1]),
        term_unit=i32([0, 0, 1]),
        term_token=i32([2, 3, 2]),
        term_advantage=f32(advantage),
        term_old_logprob=f32(old),
        term_weight=f32(weight),
        sample_offsets=i32([0, 4, 7]),
        sample_paths=i32([0, 1, 2, 3, 0, 1, 4]),
    )


GRPO = {"ratio": "token", "objective": "clip", "epsLow": 0.2, "epsHigh": 0.2, "normaliser": "sample-mean", "clipRatioC": 3}
GSPO = {"ratio": "sequence", "objective": "clip", "epsLow": 0.2, "epsHigh": 0.2, "normaliser": "sample-mean"}
