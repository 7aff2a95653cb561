"""The llama policy in plain torch, computing exactly what Arbor's TypeScript trainer computes
(src/trainer/tiny-llama.ts) on a Hugging Face checkpoint's tensors: token embedding; per block RMSNorm →
grouped-query attention with RoPE → residual, RMSNorm → SwiGLU MLP → residual; final RMSNorm and the output
head (``lm_head``, or the embedding when tied). Optional ``.bias`` tensors (qwen2's q/k/v biases, llama's
``attention_bias``/``mlp_bias``) are added where the checkpoint has them.

RoPE angles are llama.cpp's (and the TS trainer's): θ_i = pos·s^i with s = base^(−2/head_dim), built by
repeated float32 multiplication and rounded to float32, so both trainers rotate by bit-identical angles.
Weights are in HF row order, so pair i of a head is (x[i], x[i + head_dim/2]) (HF's ``rotate_half``); the
GGUF/TS layout pairs adjacent rows, which is the same computation after ``unpermuteRopeRows``.

Two layouts give per-term logprobs log_softmax(logits[term_node])[term_target]:
- tree: one pass over the packed prefix tree's nodes (docs/batch-schema.md), each node attending to its
  ancestors and itself, position id = depth;
- flat: every sample on its own, causal, positions 0..L−1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

__all__ = ["LlamaConfig", "TorchLlama", "rope_tables", "tree_visibility", "MAX_DENSE_NODES"]

#: Largest node count one dense n×n attention pass may cover (the TS trainer's MAX_MASK_NODES).
MAX_DENSE_NODES = 8192


@dataclass(frozen=True)
class LlamaConfig:
    """The hyper-parameters the forward pass needs, read from a Hugging Face ``config.json``."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    max_positions: int

    @staticmethod
    def from_hf(config: Mapping[str, object]) -> "LlamaConfig":
        """Read and check ``config.json``'s fields; raises ValueError naming the field."""

        def num(key: str, default: object = None) -> float:
            v = config.get(key, default)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise ValueError(f"config.json: {key} must be a number (got {v!r})")
            return v

        if config.get("rope_scaling") not in (None, {}):
            raise ValueError(f"config.json: rope_scaling {config.get('rope_scaling')!r} is not supported (plain RoPE only)")
        if config.get("hidden_act", "silu") != "silu":
            raise ValueError(f"config.json: hidden_act '{config.get('hidden_act')}' is not supported (silu only)")
        hidden = int(num("hidden_size"))
        heads = int(num("num_attention_heads"))
        cfg = LlamaConfig(
            hidden_size=hidden,
            intermediate_size=int(num("intermediate_size")),
            num_layers=int(num("num_hidden_layers")),
            num_heads=heads,
            num_kv_heads=int(num("num_key_value_heads", heads)),
            head_dim=int(num("head_dim", hidden // heads if heads else 0)),
            vocab_size=int(num("vocab_size")),
            rms_norm_eps=float(num("rms_norm_eps")),
            rope_theta=float(num("rope_theta", 10000.0)),
            max_positions=int(num("max_position_embeddings")),
        )
        if cfg.num_heads % cfg.num_kv_heads != 0:
            raise ValueError(f"config.json: num_attention_heads {cfg.num_heads} must be a multiple of num_key_value_heads {cfg.num_kv_heads}")
        if cfg.head_dim % 2 != 0:
            raise ValueError(f"config.json: head_dim {cfg.head_dim} must be even (RoPE rotates pairs)")
        return cfg


def rope_tables(positions: Sequence[int], head_dim: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of llama.cpp's RoPE angles, [n, head_dim/2] float32 (see the module docstring)."""
    half = head_dim // 2
    pos = np.asarray(positions, dtype=np.float32)
    scale = np.float32(math.pow(float(np.float32(base)), float(np.float32(-2.0 / head_dim))))
    theta = np.empty((pos.shape[0], half), dtype=np.float32)
    cur = pos.copy()
    for i in range(half):
        theta[:, i] = cur
        cur = (cur * scale).astype(np.float32)
    t64 = theta.astype(np.float64)
    return np.cos(t64).astype(np.float32), np.sin(t64).astype(np.float32)


def tree_visibility(parents: Sequence[int]) -> np.ndarray:
    """[n, n] bool: row i is True exactly at i and its ancestors. Parents must precede children (pre-order)."""
    p = np.asarray(parents, dtype=np.int64)
    n = p.shape[0]
    _check_nodes(n, "tree attention")
    vis = np.zeros((n, n), dtype=bool)
    for i in range(n):
        pi = int(p[i])
        if pi < -1 or pi >= i:
            raise ValueError(f"torch llama: tree node {i} has parent {pi}; parents must precede their children (pre-order)")
        if pi >= 0:
            vis[i] = vis[pi]
        vis[i, i] = True
    return vis


def _check_nodes(n: int, what: str) -> None:
    if n > MAX_DENSE_NODES:
        raise ValueError(f"torch llama: {what} over {n} tokens exceeds the dense limit of {MAX_DENSE_NODES}; split the batch")


class TorchLlama:
    """Policy weights (leaf tensors with ``requires_grad``) keyed by Hugging Face name, and the forward pass."""

    def __init__(self, config: LlamaConfig, tensors: Mapping[str, torch.Tensor], dtype: torch.dtype = torch.float32):
        self.config = config
        self.dtype = dtype
        self.params: Dict[str, torch.Tensor] = {
            name: t.detach().to(dtype).clone().requires_grad_(True) for name, t in tensors.items()
        }
        self._check()

    def _expected(self) -> Dict[str, tuple]:
        c = self.config
        q_rows, kv_rows = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
        shapes: Dict[str, tuple] = {
            "model.embed_tokens.weight": (c.vocab_size, c.hidden_size),
            "model.norm.weight": (c.hidden_size,),
        }
        for l in range(c.num_layers):
            p = f"model.layers.{l}."
            shapes.update(
                {
                    f"{p}input_layernorm.weight": (c.hidden_size,),
                    f"{p}self_attn.q_proj.weight": (q_rows, c.hidden_size),
                    f"{p}self_attn.k_proj.weight": (kv_rows, c.hidden_size),
                    f"{p}self_attn.v_proj.weight": (kv_rows, c.hidden_size),
                    f"{p}self_attn.o_proj.weight": (c.hidden_size, q_rows),
                    f"{p}post_attention_layernorm.weight": (c.hidden_size,),
                    f"{p}mlp.gate_proj.weight": (c.intermediate_size, c.hidden_size),
                    f"{p}mlp.up_proj.weight": (c.intermediate_size, c.hidden_size),
                    f"{p}mlp.down_proj.weight": (c.hidden_size, c.intermediate_size),
                }
            )
        return shapes

    def _check(self) -> None:
        expected = self._expected()
        for name, shape in expected.items():
            t = self.params.get(name)
            if t is None:
                raise ValueError(f"torch llama: tensor {name} is missing")
            if tuple(t.shape) != shape:
                raise ValueError(f"torch llama: tensor {name} has shape {list(t.shape)}, the config needs {list(shape)}")
        head = self.params.get("lm_head.weight")
        if head is not None and tuple(head.shape) != (self.config.vocab_size, self.config.hidden_size):
            raise ValueError(f"torch llama: tensor lm_head.weight has shape {list(head.shape)}, the config needs {[self.config.vocab_size, self.config.hidden_size]}")
        for name, t in self.params.items():
            if name in expected or name == "lm_head.weight":
                continue
            weight = name[: -len(".bias")] + ".weight" if name.endswith(".bias") else None
            if weight is None or weight not in expected or tuple(t.shape) != (expected[weight][0],):
                raise ValueError(f"torch llama: tensor {name} (shape {list(t.shape)}) has no place in the llama architecture")

    @property
    def tied(self) -> bool:
        """Whether the output head is the token embedding (no ``lm_head.weight``)."""
        return "lm_head.weight" not in self.params

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        y = x @ self.params[f"{name}.weight"].t()
        bias = self.params.get(f"{name}.bias")
        return y if bias is None else y + bias

    def _rms_norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.config.rms_norm_eps) * self.params[name]

    def hidden(self, tokens: Sequence[int], positions: Sequence[int], visible: np.ndarray) -> torch.Tensor:
        """Final hidden states [n, hidden] (after the last RMSNorm); ``visible[q, k]`` says whether q attends to k."""
        c = self.config
        tok = torch.as_tensor(np.asarray(tokens, dtype=np.int64))
        n = tok.shape[0]
        _check_nodes(n, "attention")
        if len(positions) != n or visible.shape != (n, n):
            raise ValueError(f"torch llama: {n} tokens need {n} positions and an {n}x{n} mask (got {len(positions)}, {visible.shape})")
        if n > 0 and (int(tok.min()) < 0 or int(tok.max()) >= c.vocab_size):
            bad = int(np.flatnonzero((tok.numpy() < 0) | (tok.numpy() >= c.vocab_size))[0])
            raise ValueError(f"torch llama: token {int(tok[bad])} at {bad} is outside the vocabulary (0..{c.vocab_size - 1})")
        hd, half, heads, kv = c.head_dim, c.head_dim // 2, c.num_heads, c.num_kv_heads
        group = heads // kv
        cos_np, sin_np = rope_tables(positions, hd, c.rope_theta)
        cos = torch.from_numpy(cos_np).to(self.dtype)[:, None, :]
        sin = torch.from_numpy(sin_np).to(self.dtype)[:, None, :]
        hidden_mask = torch.from_numpy(~visible)
        scale = 1.0 / math.sqrt(hd)

        def rope(x: torch.Tensor, nh: int) -> torch.Tensor:
            x = x.view(n, nh, hd)
            x1, x2 = x[..., :half], x[..., half:]
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

        x = self.params["model.embed_tokens.weight"][tok]
        for l in range(c.num_layers):
            p = f"model.layers.{l}."
            h = self._rms_norm(x, f"{p}input_layernorm.weight")
            q = rope(self._linear(h, f"{p}self_attn.q_proj"), heads)
            k = rope(self._linear(h, f"{p}self_attn.k_proj"), kv)
            v = self._linear(h, f"{p}self_attn.v_proj").view(n, kv, hd)
            # Query head j uses KV head j // group (HF's repeat_kv, llama.cpp's GQA): group along a new axis.
            qh = q.transpose(0, 1).reshape(kv, group, n, hd)
            kh = k.transpose(0, 1).unsqueeze(1)
            vh = v.transpose(0, 1).unsqueeze(1)
            scores = (qh @ kh.transpose(-1, -2)) * scale
            probs = torch.softmax(scores.masked_fill(hidden_mask, float("-inf")), dim=-1)
            attn = (probs @ vh).reshape(heads, n, hd).transpose(0, 1).reshape(n, heads * hd)
            x = x + self._linear(attn, f"{p}self_attn.o_proj")
            h2 = self._rms_norm(x, f"{p}post_attention_layernorm.weight")
            gate = self._linear(h2, f"{p}mlp.gate_proj")
            x = x + self._linear(torch.nn.functional.silu(gate) * self._linear(h2, f"{p}mlp.up_proj"), f"{p}mlp.down_proj")
        return self._rms_norm(x, "model.norm.weight")

    def logprobs(self, hidden: torch.Tensor, rows: Sequence[int], targets: Sequence[int]) -> torch.Tensor:
        """log π(targets[i] | hidden row rows[i]) as a [len(rows)] tensor."""
        return self.term_outputs(hidden, rows, targets)[0]

    def term_outputs(self, hidden: torch.Tensor, rows: Sequence[int], targets: Sequence[int], with_entropy: bool = False) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """``(logprobs, entropy)``: log π(targets[i] | row rows[i]) and, with ``with_entropy``, the entropy in nats of
        π at each row from the full softmax (src/trainer/token-entropy.ts: −Σ exp(l)·l over l = log_softmax(logits)),
        both from one computation of the rows' logits. The entropy is a metric: it is detached from the graph."""
        r = torch.as_tensor(np.asarray(rows, dtype=np.int64))
        t = torch.as_tensor(np.asarray(targets, dtype=np.int64))
        if r.shape != t.shape:
            raise ValueError(f"torch llama: {r.shape[0]} rows but {t.shape[0]} targets")
        if t.numel() > 0 and (int(t.min()) < 0 or int(t.max()) >= self.config.vocab_size):
            raise ValueError(f"torch llama: a target token is outside the vocabulary (0..{self.config.vocab_size - 1})")
        head = self.params["model.embed_tokens.weight"] if self.tied else self.params["lm_head.weight"]
        logits = hidden[r] @ head.t()
        lsm = torch.log_softmax(logits, dim=-1)
        logprob = lsm.gather(1, t[:, None]).squeeze(1)
        if not with_entropy:
            return logprob, None
        with torch.no_grad():
            ls = lsm.detach()
            entropy = -(ls.exp() * ls).sum(dim=-1)
        return logprob, entropy

    def tree_logprobs(self, tokens: Sequence[int], parents: Sequence[int], positions: Sequence[int], term_node: Sequence[int], term_target: Sequence[int]) -> torch.Tensor:
        """Term logprobs of a packed prefix tree in one pass with tree attention (position id = depth)."""
        return self.tree_term_outputs(tokens, parents, positions, term_node, term_target)[0]

    def tree_term_outputs(
        self, tokens: Sequence[int], parents: Sequence[int], positions: Sequence[int], term_node: Sequence[int], term_target: Sequence[int], with_entropy: bool = False
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """:meth:`tree_logprobs` and, with ``with_entropy``, each term's entropy (:meth:`term_outputs`)."""
        hidden = self.hidden(tokens, positions, tree_visibility(parents))
        return self.term_outputs(hidden, term_node, term_target, with_entropy)

    def flat_logprobs(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        sample_paths: List[np.ndarray],
        term_node: Sequence[int],
        term_sample: Sequence[int],
        term_target: Sequence[int],
    ) -> torch.Tensor:
        """Term logprobs with every sample run separately and causally; returned in the tree's term order."""
        return self.flat_term_outputs(tokens, positions, sample_paths, term_node, term_sample, term_target)[0]

    def flat_term_outputs(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        sample_paths: List[np.ndarray],
        term_node: Sequence[int],
        term_sample: Sequence[int],
        term_target: Sequence[int],
        with_entropy: bool = False,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """:meth:`flat_logprobs` and, with ``with_entropy``, each term's entropy (:meth:`term_outputs`), in term order."""
        tok = np.asarray(tokens)
        pos = np.asarray(positions)
        node = np.asarray(term_node, dtype=np.int64)
        sample = np.asarray(term_sample, dtype=np.int64)
        target = np.asarray(term_target, dtype=np.int64)
        out: List[torch.Tensor] = []
        ent: List[torch.Tensor] = []
        order: List[np.ndarray] = []
        for s in dict.fromkeys(sample.tolist()):
            if not 0 <= s < len(sample_paths):
                raise ValueError(f"torch llama: term sample {s} has no path (batch has {len(sample_paths)} samples)")
            path = np.asarray(sample_paths[s], dtype=np.int64)
            terms = np.flatnonzero(sample == s)
            # A term on node n reads the logits at n's index in the sample, which is its depth in the tree.
            rows = pos[node[terms]].astype(np.int64)
            if np.any(rows >= path.shape[0]) or np.any(path[np.minimum(rows, path.shape[0] - 1)] != node[terms]):
                raise ValueError(f"torch llama: a term of sample {s} sits on a node that is not on its path")
            L = path.shape[0]
            hidden = self.hidden(tok[path], np.arange(L), np.tri(L, dtype=bool))
            lp, h = self.term_outputs(hidden, rows, target[terms], with_entropy)
            out.append(lp)
            if h is not None:
                ent.append(h)
            order.append(terms)
        if not out:
            empty = torch.zeros(0, dtype=self.dtype)
            return empty, (empty if with_entropy else None)
        inverse = np.empty(node.shape[0], dtype=np.int64)
        inverse[np.concatenate(order)] = np.arange(node.shape[0])
        idx = torch.from_numpy(inverse)
        return torch.cat(out)[idx], (torch.cat(ent)[idx] if with_entropy else None)
