"""Parity driver for src/trainer/python-parity.test.ts (not a unittest module): computes, with the torch
trainer, what the TypeScript trainer computed for each case, and prints the differences as JSON.

Usage: ``python torch_parity.py MANIFEST.json``. The manifest (written by the TS test) holds ``hf_dir`` (the HF
export of the GGUF the TS trainer ran), ``cases`` (``name``, ``batch``: tree safetensors, ``grads``:
safetensors of the TS gradients by HF name, q/k rows in HF order, metadata ``loss`` and ``entropy`` (the TS
step's mean term entropy), tensor ``term_logprobs``), ``layouts``, ``dtypes``, optionally ``split_tokens`` (also run float64 in micro-batches
of at most that many tokens per pass: gradient accumulation must match too), and optionally ``step`` (``batch``, ``out_dir``, ``lr``: one
TorchTrainer step then ``save``) and ``roundtrip_dir`` (the checkpoint saved unchanged).

Per case, layout and dtype it reports the loss's relative error, the worst per-parameter
||g_py − g_ts|| / ||g_ts|| (with the parameter's name), the largest |logprob_py − logprob_ts| and the mean term
entropy's relative error.
"""
from __future__ import annotations

import json
import os
import sys
import types

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from arbor_client.hf_checkpoint import load_hf_checkpoint, save_hf_checkpoint  # noqa: E402
from arbor_client.safetensors import load_safetensors  # noqa: E402
from arbor_client.torch_trainer import TorchTrainer, micro_batches  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def read_batch(path: str) -> types.SimpleNamespace:
    """A tree safetensors file as the duck-typed batch the trainer takes (tensor names as attributes)."""
    tensors, meta = load_safetensors(path)
    return types.SimpleNamespace(**tensors, loss=json.loads(meta["arbor.loss"]), batch_id=meta.get("arbor.batch_id", ""))


def compare(trainer: TorchTrainer, batch: types.SimpleNamespace, grads_path: str, layout: str) -> dict:
    ts, meta = load_safetensors(grads_path)
    ts_loss = float(meta["loss"])
    ts_entropy = float(meta["entropy"])
    ts_lp = ts.pop("term_logprobs").astype(np.float64)
    loss, lp, grads = trainer.gradients(batch, layout)
    entropy = float(trainer.entropy(batch, layout).mean())
    if set(grads) != set(ts):
        raise SystemExit(f"parameter names differ: torch only {sorted(set(grads) - set(ts))}, TS only {sorted(set(ts) - set(grads))}")
    worst, worst_name = 0.0, ""
    for name, g in grads.items():
        ref = ts[name].astype(np.float64)
        diff = float(np.linalg.norm(g.astype(np.float64) - ref))
        scale = float(np.linalg.norm(ref))
        rel = diff / scale if scale > 0 else diff
        if rel > worst or not worst_name:
            worst, worst_name = rel, name
    return {
        "loss_ts": ts_loss,
        "loss_py": loss,
        "loss_rel": abs(loss - ts_loss) / max(abs(ts_loss), 1e-12),
        "grad_rel": worst,
        "worst_param": worst_name,
        "logprob_abs": float(np.max(np.abs(lp.astype(np.float64) - ts_lp))) if ts_lp.size else 0.0,
        "entropy_ts": ts_entropy,
        "entropy_py": entropy,
        "entropy_rel": abs(entropy - ts_entropy) / max(abs(ts_entropy), 1e-12),
    }


def main(manifest_path: str) -> None:
    with open(manifest_path, "r", encoding="utf-8") as f:
        m = json.load(f)
    out: dict = {"results": []}
    trainers = {name: TorchTrainer(m["hf_dir"], dtype=DTYPES[name]) for name in m["dtypes"]}
    if m.get("split_tokens"):
        trainers["float64-split"] = TorchTrainer(m["hf_dir"], dtype=torch.float64, max_pass_tokens=int(m["split_tokens"]))
    for case in m["cases"]:
        batch = read_batch(case["batch"])
        for dtype, trainer in trainers.items():
            for layout in m["layouts"]:
                r = compare(trainer, batch, case["grads"], layout)
                passes = len(micro_batches(batch, layout, trainer.max_pass_tokens))
                out["results"].append({"case": case["name"], "dtype": dtype, "layout": layout, "passes": passes, **r})
    if m.get("step"):
        s = m["step"]
        trainer = TorchTrainer(m["hf_dir"], lr=s["lr"], max_grad_norm=s.get("max_grad_norm", 1.0), version=s.get("version", 0))
        stats = trainer.step(read_batch(s["batch"]))
        out["step"] = {**stats, "path": trainer.save(s["out_dir"])}
    if m.get("roundtrip_dir"):
        ckpt = load_hf_checkpoint(m["hf_dir"])
        out["roundtrip"] = save_hf_checkpoint(m["roundtrip_dir"], ckpt.config, ckpt.tensors, source_dir=m["hf_dir"])
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: torch_parity.py MANIFEST.json")
    main(sys.argv[1])
