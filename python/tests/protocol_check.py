"""Drives a real trainer server with arbor_client; run by src/batch/python-client.test.ts (not a unittest module).

    python protocol_check.py <server url> <expected.json>

The server holds two batches, ``b1`` then ``b2``; ``expected.json`` maps each id to its samples as the
TypeScript side built them (src/testing/python-fixtures.ts ``expectedSamples``). The script pulls b1 in both
formats (Arrow when pyarrow imports), checks every sample, makes a step fail (the loop must requeue b1),
then trains: b1 brings version 1 (announced, then acked with the step's metrics, NaN gradient norm sent as null), b2 nothing (acked without an announcement). Last,
the refusals: a stale version (409), unknown batch ids (404). Each check that fails raises; on success the
script prints one JSON line of what it saw for the test to compare.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

import numpy as np

from arbor_client import Batch, TrainerClient, TrainerProtocolError, to_verl, train_loop


def check_samples(batch: Batch, want: List[Dict[str, Any]]) -> None:
    flat = batch.flat()
    assert len(flat) == len(want), f"{batch.batch_id}: {len(flat)} samples, expected {len(want)}"
    for i, (got, exp) in enumerate(zip(flat, want)):
        where = f"{batch.batch_id} sample {exp['id']}"
        assert batch.samples[i]["id"] == exp["id"], f"{where}: id {batch.samples[i]['id']}"
        assert got.tokens.tolist() == exp["tokens"], f"{where}: tokens {got.tokens.tolist()}"
        assert got.loss_mask.tolist() == exp["lossMask"], f"{where}: loss mask {got.loss_mask.tolist()}"
        assert got.unit.tolist() == exp["unit"], f"{where}: units {got.unit.tolist()}"
        for field, key in (("advantage", "advantage"), ("old_logprob", "oldLogprob"), ("weight", "weight")):
            assert np.array_equal(getattr(got, field), np.array(exp[key], dtype=np.float32)), f"{where}: {field} {getattr(got, field).tolist()}"


def expect_error(status: int, pattern: str, call) -> str:
    try:
        call()
    except TrainerProtocolError as e:
        assert e.status == status, f"expected HTTP {status}, got {e.status}: {e}"
        assert pattern in e.error, f"expected '{pattern}' in the server's error, got '{e.error}'"
        return str(e)
    raise AssertionError(f"expected HTTP {status} ({pattern}), the call succeeded")


def main(url: str, expected_path: str) -> None:
    with open(expected_path) as f:
        expected = json.load(f)
    client = TrainerClient(url, timeout=30)
    out: Dict[str, Any] = {"stats0": client.stats()}

    b1 = client.next_batch()  # safetensors, numpy only
    assert b1 is not None and b1.batch_id == "b1", f"first batch: {b1 and b1.batch_id}"
    check_samples(b1, expected["b1"])
    out["verl_shape"] = list(to_verl(b1)["input_ids"].shape)
    try:
        import pyarrow  # noqa: F401

        has_arrow = True
    except ImportError:
        has_arrow = False
    if has_arrow:
        client.requeue("b1")
        again = client.next_batch(format="arrow")
        assert again is not None and again.equals(b1), "the Arrow form of b1 differs from its safetensors form"
        check_samples(again, expected["b1"])
    out["arrow"] = has_arrow
    client.requeue("b1")

    def failing(batch: Batch):
        raise RuntimeError(f"step failed on {batch.batch_id}")

    try:
        train_loop(client, failing, batches=1)
        raise AssertionError("the failing step did not raise")
    except RuntimeError as e:
        out["failed"] = str(e)
    out["stats_after_failure"] = client.stats()

    seen: List[str] = []

    def step(batch: Batch):
        check_samples(batch, expected[batch.batch_id])
        seen.append(batch.batch_id)
        return (1, "/w/policy-v1", {"loss": 0.5, "grad_norm": float("nan"), "entropy": 1.25}) if batch.batch_id == "b1" else None

    summary = train_loop(client, step, batches=2, poll_s=0.05)
    out["summary"] = {"batch_ids": summary.batch_ids, "versions": summary.versions, "skipped": summary.skipped}
    out["seen"] = seen
    assert client.next_batch() is None, "a third batch was served"

    out["stale"] = expect_error(409, "must be greater than the current policy version 1", lambda: client.announce_weights(1, "/w/again"))
    out["unknown_ack"] = expect_error(404, "batch queue: batch 'nope' is not in flight", lambda: client.ack("nope"))
    out["unknown_requeue"] = expect_error(404, "is not in flight", lambda: client.requeue("nope"))
    out["acked_twice"] = expect_error(404, "'b1' is not in flight", lambda: client.ack("b1"))
    out["stats"] = client.stats()
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: protocol_check.py <server url> <expected.json>")
    main(sys.argv[1], sys.argv[2])
