"""A reference trainer in PyTorch with the TypeScript trainer's maths (src/trainer/trainer.ts): term logprobs
of a packed prefix-tree batch (tree or flat layout), the batch's LossSpec loss, gradients of every parameter,
global-norm clipping, then Adam (β 0.9/0.999, ε 1e-8); the policy version advances by one per step and
checkpoints are Hugging Face directories ``policy-v{N}/`` that ``arbor hf convert`` turns into GGUF. A batch
larger than ``max_pass_tokens`` per pass is split by sample and the gradients summed before the one update
(as src/trainer/micro-batches.ts; exact, since no loss term, ratio unit or mismatch mask spans samples).

The batch is duck-typed: any object with the tree safetensors' tensors (docs/batch-schema.md, schema
``arbor.tree.v2``) as numpy arrays under the same names — ``tokens``, ``parents``, ``positions``, ``term_node``,
``term_target``, ``term_sample``, ``term_unit``, ``term_advantage``, ``term_old_logprob``, ``term_weight``,
``sample_offsets``, ``sample_paths`` — and ``loss``, the LossSpec as a dict (``arbor.loss`` parsed) or "sft".
``arbor_client.batch.Batch`` is such an object.
"""
from __future__ import annotations

import math
import os
import types
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .hf_checkpoint import load_hf_checkpoint, save_hf_checkpoint
from .torch_llama import LlamaConfig, TorchLlama
from .torch_losses import batch_loss

__all__ = ["TorchTrainer", "sample_paths_of", "sub_batch", "micro_batches", "LAYOUTS", "DEFAULT_MAX_PASS_TOKENS"]

LAYOUTS = ("tree", "flat")

#: Tokens one forward/backward pass may run (tree nodes, or Σ sample lengths in the flat layout) by default.
DEFAULT_MAX_PASS_TOKENS = 4096

#: Adam's state and the step count, written into each ``policy-v{N}/`` beside the weights (torch.save): a trainer
#: started again from that directory takes the very step the uninterrupted one would have.
OPTIMIZER_FILE = "adam.pt"
OPTIMIZER_FORMAT = "arbor-torch-adam-1"

#: The per-term arrays a sub-batch slices.
_TERM_FIELDS = ("term_target", "term_unit", "term_token", "term_advantage", "term_old_logprob", "term_weight")


def sample_paths_of(batch: object) -> List[np.ndarray]:
    """Each sample's node path, from the batch's ``sample_offsets`` (samples + 1) and ``sample_paths``."""
    offsets = np.asarray(getattr(batch, "sample_offsets"), dtype=np.int64)
    flat = np.asarray(getattr(batch, "sample_paths"), dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape[0] < 1 or offsets[0] != 0 or offsets[-1] != flat.shape[0] or np.any(np.diff(offsets) < 0):
        raise ValueError(f"trainer: sample_offsets {offsets.tolist()[:8]}… do not partition the {flat.shape[0]} sample_paths entries")
    return [flat[offsets[i] : offsets[i + 1]] for i in range(offsets.shape[0] - 1)]


def sub_batch(batch: object, samples: Sequence[int]) -> Tuple[types.SimpleNamespace, np.ndarray]:
    """The batch restricted to ``samples`` (a sub-tree: the union of their paths, renumbered in pre-order) and
    the indices, in the full batch, of its terms. Exact for the loss: terms, ratio units and the mismatch mask
    never span samples, and each weight already carries the batch-wide normaliser."""
    paths = sample_paths_of(batch)
    keep = np.unique(np.concatenate([paths[s] for s in samples])) if samples else np.zeros(0, dtype=np.int64)
    local = np.full(np.asarray(getattr(batch, "tokens")).shape[0], -1, dtype=np.int64)
    local[keep] = np.arange(keep.shape[0])
    parents = np.asarray(getattr(batch, "parents"), dtype=np.int64)[keep]
    new_sample = np.full(len(paths), -1, dtype=np.int64)
    new_sample[np.asarray(samples, dtype=np.int64)] = np.arange(len(samples))
    term_sample = np.asarray(getattr(batch, "term_sample"), dtype=np.int64)
    terms = np.flatnonzero(new_sample[term_sample] >= 0)
    sub_paths = [local[paths[s]] for s in samples]
    out = types.SimpleNamespace(
        batch_id=getattr(batch, "batch_id", ""),
        loss=getattr(batch, "loss"),
        tokens=np.asarray(getattr(batch, "tokens"))[keep],
        # Ancestors of a kept node are on the same path, so they are kept too; sorting kept pre-order.
        parents=np.where(parents >= 0, local[np.maximum(parents, 0)], -1).astype(np.int32),
        positions=np.asarray(getattr(batch, "positions"))[keep],
        term_node=local[np.asarray(getattr(batch, "term_node"), dtype=np.int64)[terms]].astype(np.int32),
        term_sample=new_sample[term_sample[terms]].astype(np.int32),
        sample_offsets=np.concatenate([[0], np.cumsum([len(p) for p in sub_paths])]).astype(np.int32),
        sample_paths=(np.concatenate(sub_paths) if sub_paths else np.zeros(0)).astype(np.int32),
    )
    for field in _TERM_FIELDS:
        if hasattr(batch, field):
            setattr(out, field, np.asarray(getattr(batch, field))[terms])
    return out, terms


def micro_batches(batch: object, layout: str, max_tokens: int) -> List[Tuple[object, np.ndarray]]:
    """Split ``batch`` into runs of consecutive samples whose pass runs at most ``max_tokens`` tokens (a sample
    longer than that gets a pass of its own); the batch itself when it fits. Returns ``(batch, term indices)``."""
    paths = sample_paths_of(batch)
    n_terms = np.asarray(getattr(batch, "term_node")).shape[0]
    total = np.asarray(getattr(batch, "tokens")).shape[0] if layout == "tree" else sum(len(p) for p in paths)
    if total <= max_tokens:
        return [(batch, np.arange(n_terms))]
    groups: List[List[int]] = []
    nodes: set = set()
    count = 0
    for s, path in enumerate(paths):
        added = len(set(path.tolist()) - nodes) if layout == "tree" else len(path)
        if groups and count + added > max_tokens:
            groups.append([])
            nodes, count = set(), 0
            added = len(path)
        if not groups:
            groups.append([])
        groups[-1].append(s)
        nodes.update(path.tolist())
        count += added
    out = [sub_batch(batch, g) for g in groups]
    return [(b, t) for b, t in out if t.shape[0] > 0]


class TorchTrainer:
    """The PyTorch reference trainer over a Hugging Face llama/qwen2 checkpoint directory."""

    def __init__(
        self,
        hf_dir: str,
        lr: float = 1e-3,
        max_grad_norm: float = 1.0,
        layout: str = "tree",
        dtype: torch.dtype = torch.float32,
        version: int = 0,
        max_pass_tokens: int = DEFAULT_MAX_PASS_TOKENS,
    ):
        if not lr > 0:
            raise ValueError(f"trainer: lr must be > 0, got {lr}")
        if not max_grad_norm > 0:
            raise ValueError(f"trainer: max_grad_norm must be > 0, got {max_grad_norm}")
        if layout not in LAYOUTS:
            raise ValueError(f"trainer: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        if not (isinstance(version, int) and version >= 0):
            raise ValueError(f"trainer: version must be an integer >= 0, got {version!r}")
        if not (isinstance(max_pass_tokens, int) and max_pass_tokens > 0):
            raise ValueError(f"trainer: max_pass_tokens must be an integer > 0, got {max_pass_tokens!r}")
        ckpt = load_hf_checkpoint(hf_dir, dtype)
        self.hf_dir = hf_dir
        self.hf_config = ckpt.config
        self.model = TorchLlama(LlamaConfig.from_hf(ckpt.config), ckpt.tensors, dtype)
        self.max_grad_norm = float(max_grad_norm)
        self.layout = layout
        self.max_pass_tokens = max_pass_tokens
        self.version = version
        self.steps = 0
        self.optimizer = torch.optim.Adam(list(self.model.params.values()), lr=lr, betas=(0.9, 0.999), eps=1e-8)

    def logprobs(self, batch: object, layout: Optional[str] = None) -> torch.Tensor:
        """Differentiable term logprobs of ``batch`` in ``layout`` (default: the trainer's), in term order."""
        return self._term_outputs(batch, layout, False)[0]

    def entropy(self, batch: object, layout: Optional[str] = None) -> np.ndarray:
        """Each term's policy entropy (nats, float64) of ``batch`` in ``layout``, in term order, from the full
        softmax at the term's row (as src/trainer/token-entropy.ts); the weights and gradients do not change."""
        n_terms = np.asarray(getattr(batch, "term_node")).shape[0]
        out = np.zeros(n_terms)
        with torch.no_grad():
            for mb, terms in micro_batches(batch, layout or self.layout, self.max_pass_tokens):
                out[terms] = self._term_outputs(mb, layout, True)[1].cpu().double().numpy()
        return out

    def _term_outputs(self, batch: object, layout: Optional[str], with_entropy: bool) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Term logprobs (differentiable) and, with ``with_entropy``, term entropies (detached), in term order."""
        layout = layout or self.layout
        if layout not in LAYOUTS:
            raise ValueError(f"trainer: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        positions = np.asarray(getattr(batch, "positions"))
        if positions.size and int(positions.max()) >= self.model.config.max_positions:
            raise ValueError(f"trainer: a sample reaches position {int(positions.max())}, beyond the model's context of {self.model.config.max_positions}")
        if layout == "tree":
            return self.model.tree_term_outputs(
                getattr(batch, "tokens"), getattr(batch, "parents"), positions, getattr(batch, "term_node"), getattr(batch, "term_target"), with_entropy
            )
        return self.model.flat_term_outputs(
            getattr(batch, "tokens"),
            positions,
            sample_paths_of(batch),
            getattr(batch, "term_node"),
            getattr(batch, "term_sample"),
            getattr(batch, "term_target"),
            with_entropy,
        )

    def _loss(self, batch: object, layout: Optional[str], entropy: Optional[np.ndarray] = None) -> Tuple[float, np.ndarray, Dict[str, float]]:
        """Loss, term logprobs and loss stats of ``batch``, its gradients accumulated into the parameters' ``.grad``
        over micro-batches of at most ``max_pass_tokens`` tokens per pass. ``entropy`` (one slot per term), when
        given, receives each term's entropy from the same logits."""
        n_terms = np.asarray(getattr(batch, "term_node")).shape[0]
        if n_terms == 0:
            raise ValueError("trainer: the batch has no loss terms (every token is masked)")
        layout = layout or self.layout
        for p in self.model.params.values():
            p.grad = None
        total = 0.0
        logprobs = np.zeros(n_terms)
        stats = {"clip_fraction": 0.0, "dual_clip_fraction": 0.0, "masked_units": 0.0}
        for mb, terms in micro_batches(batch, layout, self.max_pass_tokens):
            lp, h = self._term_outputs(mb, layout, entropy is not None)
            if entropy is not None and h is not None:
                entropy[terms] = h.cpu().double().numpy()
            loss, s = batch_loss(getattr(batch, "loss"), lp, mb)
            loss.backward()
            total += float(loss.item())
            logprobs[terms] = lp.detach().cpu().double().numpy()
            # Fractions are of the batch's terms; units masked add up.
            stats["clip_fraction"] += s["clip_fraction"] * terms.shape[0] / n_terms
            stats["dual_clip_fraction"] += s["dual_clip_fraction"] * terms.shape[0] / n_terms
            stats["masked_units"] += s["masked_units"]
        return total, logprobs, stats

    def gradients(self, batch: object, layout: Optional[str] = None) -> Tuple[float, np.ndarray, Dict[str, np.ndarray]]:
        """``(loss, term logprobs, {hf_name: gradient})`` of ``batch`` in ``layout``; the weights do not change."""
        loss, lp, _ = self._loss(batch, layout)
        grads = {name: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().cpu().numpy().copy() for name, p in self.model.params.items()}
        for p in self.model.params.values():
            p.grad = None
        return loss, lp, grads

    def step(self, batch: object) -> Dict[str, float]:
        """One optimizer step on ``batch``: loss, gradients, global-norm clip, Adam; the version advances by one.

        Returns ``loss``, ``grad_norm`` (before clipping), ``version`` (after the step), ``terms``,
        ``clip_fraction``, ``dual_clip_fraction``, ``masked_units`` and ``entropy`` (the mean over the batch's terms
        of the policy's entropy before the step, as the TS trainer's ``entropy``). A non-finite gradient norm raises
        and leaves the weights untouched.
        """
        n_terms = np.asarray(getattr(batch, "term_node")).shape[0]
        entropy = np.zeros(n_terms)
        loss, _, stats = self._loss(batch, self.layout, entropy)
        params = list(self.model.params.values())
        # float64 accumulation of per-tensor sums of squares, as the TS trainer's globalNorm.
        sq = sum(float((p.grad.double() ** 2).sum()) for p in params if p.grad is not None)
        norm = math.sqrt(sq)
        if not math.isfinite(norm):
            for p in params:
                p.grad = None
            raise ValueError(f"trainer: gradient norm is {norm}; the step was not applied")
        if norm > self.max_grad_norm:
            scale = self.max_grad_norm / (norm + 1e-6)
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(scale)
        self.optimizer.step()
        for p in params:
            p.grad = None
        self.steps += 1
        self.version += 1
        return {
            "loss": loss,
            "grad_norm": norm,
            "version": self.version,
            "terms": int(np.asarray(getattr(batch, "term_node")).shape[0]),
            "clip_fraction": stats["clip_fraction"],
            "dual_clip_fraction": stats["dual_clip_fraction"],
            "masked_units": stats["masked_units"],
            "entropy": float(entropy.mean()) if n_terms > 0 else float("nan"),
        }

    def tensors(self) -> Dict[str, torch.Tensor]:
        """The current weights (detached), by Hugging Face name."""
        return {name: p.detach() for name, p in self.model.params.items()}

    def save(self, out_dir: str) -> str:
        """Write the current weights as ``out_dir/policy-v{version}/`` (HF layout, F32, tokenizer files copied
        from the starting checkpoint); returns that directory's path."""
        path = os.path.join(out_dir, f"policy-v{self.version}")
        saved = save_hf_checkpoint(path, self.hf_config, self.tensors(), source_dir=self.hf_dir)
        # Adam's state is keyed by parameter position, which follows the order a checkpoint's tensors load in (an HF
        # export's and this save's differ): the names go with it.
        state = {"format": OPTIMIZER_FORMAT, "steps": self.steps, "names": list(self.model.params), "optimizer": self.optimizer.state_dict()}
        tmp = os.path.join(saved, f".{OPTIMIZER_FILE}.tmp")
        torch.save(state, tmp)
        os.replace(tmp, os.path.join(saved, OPTIMIZER_FILE))
        return saved

    def load_optimizer_state(self, path: str) -> None:
        """Restore Adam's state and the step count that :meth:`save` wrote (``policy-v{N}/adam.pt``) into a trainer
        started from that directory; raises ValueError when the file is not such a state."""
        state = torch.load(path, map_location="cpu")
        if not (isinstance(state, dict) and state.get("format") == OPTIMIZER_FORMAT):
            raise ValueError(f"trainer: {path} is not an Arbor optimizer state (format {OPTIMIZER_FORMAT!r})")
        names, current = list(state["names"]), list(self.model.params)
        if sorted(names) != sorted(current):
            raise ValueError(f"trainer: {path}: its parameters are not this model's ({len(names)} saved, {len(current)} here)")
        # Moments by name, into this trainer's positions; the hyperparameters (lr, betas) stay this trainer's.
        at = {name: i for i, name in enumerate(current)}
        mine = self.optimizer.state_dict()
        mine["state"] = {at[names[int(k)]]: v for k, v in state["optimizer"]["state"].items()}
        self.optimizer.load_state_dict(mine)
        self.steps = int(state["steps"])
