"""A reference trainer in PyTorch with the TypeScript trainer's maths (src/trainer/trainer.ts): term logprobs
of a packed prefix-tree batch (tree or flat layout), the batch's LossSpec loss, gradients of every parameter,
global-norm clipping, then Adam (β 0.9/0.999, ε 1e-8); the policy version advances by one per step and
checkpoints are Hugging Face directories ``policy-v{N}/`` that ``arbor hf convert`` turns into GGUF.

The batch is duck-typed: any object with the tree safetensors' tensors (docs/batch-schema.md, schema
``arbor.tree.v2``) as numpy arrays under the same names — ``tokens``, ``parents``, ``positions``, ``term_node``,
``term_target``, ``term_sample``, ``term_unit``, ``term_advantage``, ``term_old_logprob``, ``term_weight``,
``sample_offsets``, ``sample_paths`` — and ``loss``, the LossSpec as a dict (``arbor.loss`` parsed) or "sft".
``arbor_client.batch.Batch`` is such an object.
"""
from __future__ import annotations

import math
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from .hf_checkpoint import load_hf_checkpoint, save_hf_checkpoint
from .torch_llama import LlamaConfig, TorchLlama
from .torch_losses import batch_loss

__all__ = ["TorchTrainer", "sample_paths_of", "LAYOUTS"]

LAYOUTS = ("tree", "flat")


def sample_paths_of(batch: object) -> List[np.ndarray]:
    """Each sample's node path, from the batch's ``sample_offsets`` (samples + 1) and ``sample_paths``."""
    offsets = np.asarray(getattr(batch, "sample_offsets"), dtype=np.int64)
    flat = np.asarray(getattr(batch, "sample_paths"), dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape[0] < 1 or offsets[0] != 0 or offsets[-1] != flat.shape[0] or np.any(np.diff(offsets) < 0):
        raise ValueError(f"trainer: sample_offsets {offsets.tolist()[:8]}… do not partition the {flat.shape[0]} sample_paths entries")
    return [flat[offsets[i] : offsets[i + 1]] for i in range(offsets.shape[0] - 1)]


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
    ):
        if not lr > 0:
            raise ValueError(f"trainer: lr must be > 0, got {lr}")
        if not max_grad_norm > 0:
            raise ValueError(f"trainer: max_grad_norm must be > 0, got {max_grad_norm}")
        if layout not in LAYOUTS:
            raise ValueError(f"trainer: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        if not (isinstance(version, int) and version >= 0):
            raise ValueError(f"trainer: version must be an integer >= 0, got {version!r}")
        ckpt = load_hf_checkpoint(hf_dir, dtype)
        self.hf_dir = hf_dir
        self.hf_config = ckpt.config
        self.model = TorchLlama(LlamaConfig.from_hf(ckpt.config), ckpt.tensors, dtype)
        self.max_grad_norm = float(max_grad_norm)
        self.layout = layout
        self.version = version
        self.steps = 0
        self.optimizer = torch.optim.Adam(list(self.model.params.values()), lr=lr, betas=(0.9, 0.999), eps=1e-8)

    def logprobs(self, batch: object, layout: Optional[str] = None) -> torch.Tensor:
        """Differentiable term logprobs of ``batch`` in ``layout`` (default: the trainer's), in term order."""
        layout = layout or self.layout
        if layout not in LAYOUTS:
            raise ValueError(f"trainer: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        positions = np.asarray(getattr(batch, "positions"))
        if positions.size and int(positions.max()) >= self.model.config.max_positions:
            raise ValueError(f"trainer: a sample reaches position {int(positions.max())}, beyond the model's context of {self.model.config.max_positions}")
        if layout == "tree":
            return self.model.tree_logprobs(
                getattr(batch, "tokens"), getattr(batch, "parents"), positions, getattr(batch, "term_node"), getattr(batch, "term_target")
            )
        return self.model.flat_logprobs(
            getattr(batch, "tokens"),
            positions,
            sample_paths_of(batch),
            getattr(batch, "term_node"),
            getattr(batch, "term_sample"),
            getattr(batch, "term_target"),
        )

    def _loss(self, batch: object, layout: Optional[str]) -> Tuple[torch.Tensor, torch.Tensor, Dict[str, float]]:
        if np.asarray(getattr(batch, "term_node")).shape[0] == 0:
            raise ValueError("trainer: the batch has no loss terms (every token is masked)")
        for p in self.model.params.values():
            p.grad = None
        lp = self.logprobs(batch, layout)
        loss, stats = batch_loss(getattr(batch, "loss"), lp, batch)
        loss.backward()
        return loss, lp, stats

    def gradients(self, batch: object, layout: Optional[str] = None) -> Tuple[float, np.ndarray, Dict[str, np.ndarray]]:
        """``(loss, term logprobs, {hf_name: gradient})`` of ``batch`` in ``layout``; the weights do not change."""
        loss, lp, _ = self._loss(batch, layout)
        grads = {name: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().cpu().numpy().copy() for name, p in self.model.params.items()}
        for p in self.model.params.values():
            p.grad = None
        return float(loss.item()), lp.detach().cpu().numpy(), grads

    def step(self, batch: object) -> Dict[str, float]:
        """One optimizer step on ``batch``: loss, gradients, global-norm clip, Adam; the version advances by one.

        Returns ``loss``, ``grad_norm`` (before clipping), ``version`` (after the step), ``terms``,
        ``clip_fraction``, ``dual_clip_fraction`` and ``masked_units``. A non-finite gradient norm raises and
        leaves the weights untouched.
        """
        loss, _, stats = self._loss(batch, self.layout)
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
            "loss": float(loss.item()),
            "grad_norm": norm,
            "version": self.version,
            "terms": int(np.asarray(getattr(batch, "term_node")).shape[0]),
            "clip_fraction": stats["clip_fraction"],
            "dual_clip_fraction": stats["dual_clip_fraction"],
            "masked_units": stats["masked_units"],
        }

    def tensors(self) -> Dict[str, torch.Tensor]:
        """The current weights (detached), by Hugging Face name."""
        return {name: p.detach() for name, p in self.model.params.items()}

    def save(self, out_dir: str) -> str:
        """Write the current weights as ``out_dir/policy-v{version}/`` (HF layout, F32, tokenizer files copied
        from the starting checkpoint); returns that directory's path."""
        path = os.path.join(out_dir, f"policy-v{self.version}")
        return save_hf_checkpoint(path, self.hf_config, self.tensors(), source_dir=self.hf_dir)
