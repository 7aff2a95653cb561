"""A :class:`~arbor_client.batch.Batch` in the batch layouts of verl, slime and TRL (numpy; wrap with torch yourself).

Read from these sources (the keys, shapes, padding sides and masks below are theirs):

- verl, volcengine/verl @ b178a3cd56f58b2d502255daba591e92833930a7: ``verl/experimental/agent_loop/agent_loop.py``
  (``generate_sequences`` docstring and ``_postprocess``: prompts left-padded, responses right-padded, multi-turn
  ``response_mask`` 0 on tool/observation tokens and padding, ``rollout_log_probs`` right-padded with 0),
  ``verl/utils/model.py`` (``compute_position_id_with_mask``: ``clip(cumsum(attention_mask) - 1, min=0)``),
  ``verl/workers/actor/dp_actor.py`` (``update_policy`` selects ``responses, response_mask, input_ids,
  attention_mask, position_ids, old_log_probs, advantages``; log-probs are taken for the last R positions),
  ``verl/trainer/ppo/core_algos.py`` (``compute_policy_loss_vanilla(old_log_prob, log_prob, advantages,
  response_mask, ...)``, all ``[B, R]``), ``verl/protocol.py`` (``DataProto.from_single_dict``: torch tensors go to
  ``batch``, numpy arrays to ``non_tensor_batch``).
- slime, THUDM/slime @ 624b824a898ab0ec1fcb4d373004c7f3852bf515: ``slime/utils/types.py`` (``Sample``: ``tokens``
  = prompt + response, ``response_length``, ``loss_mask`` and ``rollout_log_probs`` of length ``response_length``),
  ``slime/ray/rollout.py`` (``_convert_samples_to_train_data``: ``tokens``, ``response_lengths``, ``rewards``,
  ``loss_masks``, ``rollout_log_probs``, ``sample_indices``, ``rollout_ids``), ``examples/search-r1/
  generate_with_search.py`` (multi-turn: observation tokens in the response with loss mask 0 and logprob 0.0),
  ``slime/backends/megatron_utils/loss.py`` (``rollout_data["advantages"]``: one tensor of ``response_length``
  per sample, set by ``--custom-advantage-function-path`` hooks).
- TRL, huggingface/trl @ f2cd57710ae345ea6428ae95363267fcf38a3dc8: ``trl/trainer/grpo_trainer.py``
  (``_generate_and_score_completions``: ``prompt_ids``/``prompt_mask`` left-padded, ``completion_ids``/
  ``completion_mask`` right-padded, ``tool_mask`` 0 on tool-result tokens and padded with 1,
  ``sampling_per_token_logps`` right-padded with 0; ``_compute_loss`` takes ``advantages`` ``[B]`` or ``[B, C]``
  and masks the loss with ``completion_mask * tool_mask``).

Split of an Arbor sample (a merged multi-turn sequence whose masked tool output may sit between model
tokens): *prompt* = the tokens before its first model token (loss mask 1), *response*/*completion* = the
rest, with the mask 0 on its non-model tokens — verl's and slime's multi-turn convention. A sample with
no model token is all prompt (empty response).

Per-token loss weights (the estimator's normaliser, docs/batch-schema.md) have no field in these layouts:
match the framework's loss aggregation (verl ``loss_agg_mode``, TRL ``loss_type``) to ``batch.loss``, or
use ``Batch.flat()``'s ``weight`` in a custom loss.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .batch import Batch, FlatSample

__all__ = ["split_samples", "to_verl", "to_trl", "to_slime"]


def split_samples(batch: Batch) -> List[int]:
    """Prompt length of each sample: the index of its first model token (its length when it has none)."""
    return _cuts(batch.flat())


def _cuts(flat: List[FlatSample]) -> List[int]:
    out = []
    for s in flat:
        model = np.nonzero(s.loss_mask)[0]
        out.append(int(model[0]) if len(model) else len(s.tokens))
    return out


def _pad(rows: List[np.ndarray], width: int, value: Any, dtype: Any, left: bool) -> np.ndarray:
    out = np.full((len(rows), width), value, dtype=dtype)
    for i, r in enumerate(rows):
        if len(r):
            if left:
                out[i, width - len(r) :] = r
            else:
                out[i, : len(r)] = r
    return out


def _width(lengths: List[int], given: Optional[int], name: str) -> int:
    longest = max(lengths, default=0)
    if given is None:
        return longest
    if longest > given:
        raise ValueError(f"{name}: {given} is shorter than the longest one in the batch ({longest} tokens)")
    return given


def _parts(batch: Batch) -> Tuple[List[FlatSample], List[int]]:
    flat = batch.flat()
    return flat, _cuts(flat)


def to_verl(batch: Batch, pad_token_id: int = 0, prompt_length: Optional[int] = None, response_length: Optional[int] = None) -> Dict[str, np.ndarray]:
    """verl ``DataProto`` batch keys, ``[B, P]``/``[B, R]``/``[B, P+R]`` numpy arrays (B = samples, in order).

    ``prompts`` (int64, left-padded with ``pad_token_id``), ``responses`` (int64, right-padded), ``input_ids`` =
    prompts ‖ responses, ``attention_mask`` (int64, 1 on real tokens), ``position_ids`` (verl's
    ``compute_position_id_with_mask``), ``response_mask`` (int64, 1 on model tokens only), ``old_log_probs`` and
    ``rollout_log_probs`` (float32, the engine's logprobs; 0 off the mask), ``advantages`` (float32, 0 off the
    mask); plus ``uid`` (object array of group ids, a non-tensor key: verl's GRPO groups by it).
    P and R default to the longest prompt and response; pass ``prompt_length``/``response_length`` for fixed
    shapes. ``token_level_rewards`` is not given: Arbor hands over advantages, not rewards to estimate from.
    Use: ``DataProto.from_single_dict({k: v if k == "uid" else torch.from_numpy(v) for k, v in d.items()})``.
    """
    flat, cut = _parts(batch)
    P = _width(cut, prompt_length, "prompt_length")
    R = _width([len(s.tokens) - c for s, c in zip(flat, cut)], response_length, "response_length")
    prompts = _pad([s.tokens[:c] for s, c in zip(flat, cut)], P, pad_token_id, np.int64, left=True)
    responses = _pad([s.tokens[c:] for s, c in zip(flat, cut)], R, pad_token_id, np.int64, left=False)
    prompt_attn = _pad([np.ones(c) for c in cut], P, 0, np.int64, left=True)
    response_attn = _pad([np.ones(len(s.tokens) - c) for s, c in zip(flat, cut)], R, 0, np.int64, left=False)
    attention_mask = np.concatenate([prompt_attn, response_attn], axis=1)
    logprobs = _pad([s.old_logprob[c:] for s, c in zip(flat, cut)], R, 0.0, np.float32, left=False)
    return {
        "prompts": prompts,
        "responses": responses,
        "input_ids": np.concatenate([prompts, responses], axis=1),
        "attention_mask": attention_mask,
        "position_ids": np.clip(np.cumsum(attention_mask, axis=1) - 1, 0, None).astype(np.int64),
        "response_mask": _pad([s.loss_mask[c:] for s, c in zip(flat, cut)], R, 0, np.int64, left=False),
        "old_log_probs": logprobs,
        "rollout_log_probs": logprobs.copy(),
        "advantages": _pad([s.advantage[c:] for s, c in zip(flat, cut)], R, 0.0, np.float32, left=False),
        "uid": np.array([str(m.get("groupId", "")) for m in batch.samples], dtype=object),
    }


def to_trl(batch: Batch, pad_token_id: int = 0) -> Dict[str, np.ndarray]:
    """The inputs TRL's ``GRPOTrainer._compute_loss`` reads, as ``_generate_and_score_completions`` builds them.

    ``prompt_ids``/``prompt_mask`` ``[B, P]`` left-padded; ``completion_ids``/``completion_mask`` ``[B, C]``
    right-padded (mask 1 on every real completion token, tool output included); ``tool_mask`` ``[B, C]`` (0 on
    non-model tokens inside the completion, 1 elsewhere, padding included, as TRL pads it);
    ``old_per_token_logps`` and ``sampling_per_token_logps`` ``[B, C]`` float32 (the engine's logprobs, 0 off the
    mask); ``advantages`` ``[B, C]`` float32 per token (TRL accepts ``[B, C]``; Arbor's advantages may vary within
    a sample, e.g. per chunk); ``num_items_in_batch`` (int64 scalar: tokens under ``completion_mask * tool_mask``).
    """
    flat, cut = _parts(batch)
    P = _width(cut, None, "prompt_length")
    C = _width([len(s.tokens) - c for s, c in zip(flat, cut)], None, "completion_length")
    completion_mask = _pad([np.ones(len(s.tokens) - c) for s, c in zip(flat, cut)], C, 0, np.int64, left=False)
    tool_mask = _pad([s.loss_mask[c:] for s, c in zip(flat, cut)], C, 1, np.int64, left=False)
    logps = _pad([s.old_logprob[c:] for s, c in zip(flat, cut)], C, 0.0, np.float32, left=False)
    return {
        "prompt_ids": _pad([s.tokens[:c] for s, c in zip(flat, cut)], P, pad_token_id, np.int64, left=True),
        "prompt_mask": _pad([np.ones(c) for c in cut], P, 0, np.int64, left=True),
        "completion_ids": _pad([s.tokens[c:] for s, c in zip(flat, cut)], C, pad_token_id, np.int64, left=False),
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "old_per_token_logps": logps,
        "sampling_per_token_logps": logps.copy(),
        "advantages": _pad([s.advantage[c:] for s, c in zip(flat, cut)], C, 0.0, np.float32, left=False),
        "num_items_in_batch": np.array((completion_mask * tool_mask).sum(), dtype=np.int64),
    }


def to_slime(batch: Batch) -> Dict[str, Any]:
    """slime's train data (``_convert_samples_to_train_data``): per-sample lists, unpadded.

    ``tokens`` (prompt ‖ response ids), ``response_lengths``, ``loss_masks`` and ``rollout_log_probs`` (length
    ``response_length`` each; 0 / 0.0 on tool output), ``advantages`` (float32 arrays of ``response_length``, for
    a ``--custom-advantage-function-path`` that copies them into ``rollout_data``), ``sample_indices``,
    ``rollout_ids`` (dense ids of the samples' programs: segments of one program share one, as slime's
    ``rollout_id`` wants), and ``rewards`` (each sample's program reward) when the batch carries ``programs``.
    """
    flat, cut = _parts(batch)
    program_ids: Dict[str, int] = {}
    rollout_ids = [program_ids.setdefault(str(m.get("programId", i)), len(program_ids)) for i, m in enumerate(batch.samples)]
    out: Dict[str, Any] = {
        "tokens": [s.tokens.tolist() for s in flat],
        "response_lengths": [len(s.tokens) - c for s, c in zip(flat, cut)],
        "loss_masks": [s.loss_mask[c:].tolist() for s, c in zip(flat, cut)],
        "rollout_log_probs": [s.old_logprob[c:].tolist() for s, c in zip(flat, cut)],
        "advantages": [s.advantage[c:].copy() for s, c in zip(flat, cut)],
        "sample_indices": list(range(len(flat))),
        "rollout_ids": rollout_ids,
    }
    if batch.programs is not None:
        reward = {str(p["programId"]): float(p["reward"]) for p in batch.programs}
        missing = [m.get("programId") for m in batch.samples if str(m.get("programId")) not in reward]
        if missing:
            raise ValueError(f"to_slime: programs metadata has no reward for program '{missing[0]}'")
        out["rewards"] = [reward[str(m["programId"])] for m in batch.samples]
    return out

