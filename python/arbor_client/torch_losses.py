"""Arbor's policy-gradient loss (the LossSpec of src/batch/estimators/loss-spec.ts) and SFT cross-entropy on
torch tensors, term for term what the TypeScript trainer (src/trainer/losses.ts) computes. Per term t:

    d_t     = logprob_t − old_logprob_t
    log ρ_t = d_t (ratio "token")  |  mean of d over t's unit (ratio "sequence" / "chunk"; gradient reaches
              every term of the unit)
    ρ̄_t     = clip(ρ_t, 1 − epsLow, 1 + epsHigh)
    f_t     = min(ρ_t·A_t, ρ̄_t·A_t)                (objective "clip"; the ρ·A side on ties)
            = max(that, c·A_t) where A_t < 0      (dual clip, ``clipRatioC`` = c; the bound is a constant)
            = sg(ρ̄_t)·A_t·logprob_t                (objective "cispo")
    m_u     = 1[exp(mean_u(trainer_old − old_logprob)) ≤ H]   (``mismatchThreshold`` H; trainer_old = the
              detached logprob unless given)
    loss    = −Σ_t weight_t · m_{unit(t)} · f_t

The weights already carry the batch's normaliser, so there is no other reduction.
"""
from __future__ import annotations

import math
from typing import Dict, Mapping, Optional, Tuple, Union

import numpy as np
import torch

__all__ = ["policy_loss", "sft_loss", "validate_loss_spec", "batch_loss"]

LossSpec = Mapping[str, object]


def validate_loss_spec(spec: LossSpec) -> LossSpec:
    """Check a LossSpec's fields (as loss-spec.ts ``validateLossSpec``); raises ValueError naming the field."""
    if spec.get("ratio") not in ("token", "sequence", "chunk"):
        raise ValueError(f"loss: ratio must be token, sequence or chunk (got {spec.get('ratio')!r})")
    if spec.get("objective") not in ("clip", "cispo"):
        raise ValueError(f"loss: objective must be clip or cispo (got {spec.get('objective')!r})")
    for key in ("epsLow", "epsHigh"):
        v = spec.get(key)
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"loss: {key} must be a finite number >= 0, got {v!r}")
    h = spec.get("mismatchThreshold")
    if h is not None and not (isinstance(h, (int, float)) and h > 0):
        raise ValueError(f"loss: mismatchThreshold must be > 0, got {h!r}")
    c = spec.get("clipRatioC")
    if c is not None:
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c > 1):
            raise ValueError(f"loss: clipRatioC must be a finite number > 1, got {c!r}")
        if spec["objective"] != "clip":
            raise ValueError(f"loss: clipRatioC applies to objective 'clip' only, not '{spec['objective']}'")
    return spec


def _dense_units(ratio: str, unit: np.ndarray, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """Unit ids 0..U−1 in order of first appearance (each term its own unit for ratio "token"), and counts."""
    if ratio == "token":
        return np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int64)
    _, first, inverse = np.unique(unit, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    ids = rank[inverse.reshape(-1)]
    return ids, np.bincount(ids, minlength=first.shape[0])


def policy_loss(
    spec: LossSpec,
    logprob: torch.Tensor,
    old_logprob: np.ndarray,
    advantage: np.ndarray,
    weight: np.ndarray,
    unit: Optional[np.ndarray] = None,
    trainer_old_logprob: Optional[np.ndarray] = None,
) -> Tuple[torch.Tensor, Dict[str, float]]:
    """The scalar loss of ``spec`` for differentiable term logprobs ``logprob`` [n] and per-term constants.

    ``unit`` is each term's ratio unit (required for ratio "sequence"/"chunk"). Returns ``(loss, stats)`` with
    stats ``clip_fraction``, ``dual_clip_fraction`` (fractions of terms, as ``referenceLoss`` counts them),
    ``masked_units`` and ``units``.
    """
    validate_loss_spec(spec)
    n = int(logprob.shape[0])
    arrays = {"old_logprob": old_logprob, "advantage": advantage, "weight": weight}
    if spec["ratio"] != "token":
        if unit is None:
            raise ValueError(f"loss: a '{spec['ratio']}' ratio needs each term's unit")
        arrays["unit"] = unit
    for key, arr in arrays.items():
        if np.asarray(arr).shape != (n,):
            raise ValueError(f"loss: {key} has {np.asarray(arr).shape} entries for {n} terms")
    stats = {"clip_fraction": 0.0, "dual_clip_fraction": 0.0, "masked_units": 0.0, "units": 0.0}
    if n == 0:
        return logprob.sum() * 0, stats
    dt = logprob.dtype
    ids, counts = _dense_units(str(spec["ratio"]), np.asarray(unit if unit is not None else np.arange(n)), n)
    ids_t = torch.from_numpy(ids)
    old = torch.as_tensor(np.asarray(old_logprob), dtype=dt)
    adv = torch.as_tensor(np.asarray(advantage), dtype=dt)
    d = logprob - old
    if spec["ratio"] == "token":
        log_rho = d
    else:
        per_unit = torch.zeros(counts.shape[0], dtype=dt).index_add(0, ids_t, d) / torch.as_tensor(counts, dtype=dt)
        log_rho = per_unit[ids_t]

    # The mismatch mask selects terms from values only (float64, as the TS trainer sums them); not differentiated.
    keep = np.ones(n)
    h = spec.get("mismatchThreshold")
    if h is not None:
        trainer_old = logprob.detach().cpu().numpy() if trainer_old_logprob is None else np.asarray(trainer_old_logprob)
        if trainer_old.shape != (n,):
            raise ValueError(f"loss: trainer_old_logprob has {trainer_old.shape} entries for {n} terms")
        diff = trainer_old.astype(np.float64) - np.asarray(old_logprob).astype(np.float64)
        sums = np.bincount(ids, weights=diff, minlength=counts.shape[0])
        masked = np.exp(sums / counts) > float(h)
        keep = np.where(masked[ids], 0.0, 1.0)
        stats["masked_units"] = float(masked.sum())
    stats["units"] = float(counts.shape[0])
    w = torch.as_tensor(np.asarray(weight) * keep, dtype=dt)
    kept = torch.from_numpy(keep > 0)

    rho = torch.exp(log_rho)
    clipped = torch.clamp(rho, 1 - float(spec["epsLow"]), 1 + float(spec["epsHigh"]))
    a = adv
    if spec["objective"] == "clip":
        unclipped_side = rho * a <= clipped * a
        f = torch.where(unclipped_side, rho * a, clipped * a)
        stats["clip_fraction"] = float((~unclipped_side & kept).sum()) / n
        c = spec.get("clipRatioC")
        if c is not None:
            bound = (a < 0) & (float(c) * a > f)
            f = torch.where(bound, float(c) * a, f)
            stats["dual_clip_fraction"] = float((bound & kept).sum()) / n
    else:
        f = clipped.detach() * a * logprob
        stats["clip_fraction"] = float(((clipped != rho) & kept).sum()) / n
    return -(w * f).sum(), stats


def sft_loss(logprob: torch.Tensor, weight: np.ndarray) -> torch.Tensor:
    """Supervised cross-entropy −Σ weight_t · log π(target_t) (weights carry the normaliser)."""
    w = np.asarray(weight)
    if w.shape != tuple(logprob.shape):
        raise ValueError(f"loss: weight has {w.shape} entries for {tuple(logprob.shape)} terms")
    return -(torch.as_tensor(w, dtype=logprob.dtype) * logprob).sum()


def batch_loss(
    spec: Union[LossSpec, str],
    logprob: torch.Tensor,
    batch: object,
) -> Tuple[torch.Tensor, Dict[str, float]]:
    """The loss of a tree batch (duck-typed: ``term_old_logprob``, ``term_advantage``, ``term_weight``,
    ``term_unit``) for its ``spec`` (a LossSpec mapping, or ``"sft"``)."""
    if spec == "sft":
        return sft_loss(logprob, getattr(batch, "term_weight")), {"clip_fraction": 0.0, "dual_clip_fraction": 0.0, "masked_units": 0.0, "units": 0.0}
    assert not isinstance(spec, str)
    return policy_loss(
        spec,
        logprob,
        np.asarray(getattr(batch, "term_old_logprob")),
        np.asarray(getattr(batch, "term_advantage")),
        np.asarray(getattr(batch, "term_weight")),
        np.asarray(getattr(batch, "term_unit")),
    )
