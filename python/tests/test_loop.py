"""train_loop: the protocol's order (announce, then ack), skips, requeue on failure, bounds; TrainerClient's own checks.

The loop runs here against an in-memory recorder of the client's calls; src/batch/python-client.test.ts runs
it (and the client) against the real trainer server.
"""
from __future__ import annotations

import socket
import unittest
from typing import List, Optional

from arbor_client.batch import Batch
from arbor_client.client import TrainerClient, TrainerProtocolError
from arbor_client.loop import train_loop

from .fixtures import read_bytes


class RecordingClient:
    """Hands out the given batches (None = an empty poll) and records every call in order."""

    base_url = "http://recorder"

    def __init__(self, batches: List[Optional[Batch]], fail_requeue: bool = False) -> None:
        self.batches = list(batches)
        self.calls: List[tuple] = []
        self.fail_requeue = fail_requeue

    def next_batch(self, format: str = "safetensors") -> Optional[Batch]:
        self.calls.append(("next", format))
        return self.batches.pop(0) if self.batches else None

    def announce_weights(self, version: int, path: str) -> dict:
        self.calls.append(("announce", version, path))
        return {"ok": True}

    def ack(self, batch_id: str) -> None:
        self.calls.append(("ack", batch_id))

    def requeue(self, batch_id: str) -> None:
        self.calls.append(("requeue", batch_id))
        if self.fail_requeue:
            raise TrainerProtocolError("trainer protocol: requeue b: HTTP 404", 404, "not in flight")


def batch(batch_id: str) -> Batch:
    b = Batch.from_safetensors(read_bytes("grpo", "safetensors"))
    b.batch_id = batch_id
    return b


class TrainLoopTest(unittest.TestCase):
    def test_announces_then_acks_and_acks_steps_without_weights(self) -> None:
        client = RecordingClient([batch("b1"), None, batch("b2"), batch("b3")])
        sleeps: List[float] = []
        steps = iter([(1, "/w/v1"), None, (2, "/w/v2")])
        summary = train_loop(client, lambda b: next(steps), batches=3, poll_s=0.5, sleep=sleeps.append)
        self.assertEqual(
            client.calls,
            [("next", "safetensors"), ("announce", 1, "/w/v1"), ("ack", "b1"), ("next", "safetensors"), ("next", "safetensors"), ("ack", "b2"),
             ("next", "safetensors"), ("announce", 2, "/w/v2"), ("ack", "b3")],
        )
        self.assertEqual(sleeps, [0.5])
        self.assertEqual((summary.batch_ids, summary.versions, summary.skipped, summary.empty_polls, summary.batches), (["b1", "b2", "b3"], [1, 2], 1, 1, 3))

    def test_requeues_on_a_failed_step_and_reraises(self) -> None:
        client = RecordingClient([batch("b1")])

        def step(_: Batch):
            raise RuntimeError("out of memory")

        with self.assertRaisesRegex(RuntimeError, "out of memory"):
            train_loop(client, step, batches=1)
        self.assertEqual(client.calls, [("next", "safetensors"), ("requeue", "b1")])

    def test_a_failed_requeue_is_noted_on_the_original_error(self) -> None:
        client = RecordingClient([batch("b1")], fail_requeue=True)

        def step(_: Batch):
            raise RuntimeError("diverged")

        with self.assertRaisesRegex(RuntimeError, "diverged") as ctx:
            train_loop(client, step, batches=1)
        self.assertIn("requeueing batch b1 failed too: trainer protocol: requeue b: HTTP 404", ctx.exception.__notes__[0])

    def test_stop_is_checked_before_each_pull(self) -> None:
        client = RecordingClient([batch("b1"), batch("b2")])
        acked: List[str] = []
        summary = train_loop(client, lambda b: acked.append(b.batch_id), stop=lambda: len(acked) >= 1)
        self.assertEqual(summary.batch_ids, ["b1"])
        self.assertEqual(len(client.batches), 1)

    def test_idle_timeout_bounds_the_wait_for_a_batch(self) -> None:
        client = RecordingClient([])
        now = [0.0]

        def sleep(s: float) -> None:
            now[0] += s

        with self.assertRaisesRegex(TrainerProtocolError, r"no batch from http://recorder within 1.0s \(0 acked so far, 6 empty polls\)"):
            train_loop(client, lambda b: None, poll_s=0.2, idle_timeout_s=1.0, sleep=sleep, clock=lambda: now[0])

    def test_refuses_bad_arguments(self) -> None:
        with self.assertRaisesRegex(ValueError, "batches: must be >= 0"):
            train_loop(RecordingClient([]), lambda b: None, batches=-1)


class TrainerClientTest(unittest.TestCase):
    def test_unreachable_server_is_a_protocol_error_saying_so(self) -> None:
        # A port nothing listens on: bind one, then close it.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        client = TrainerClient(f"http://127.0.0.1:{port}", timeout=5)
        with self.assertRaisesRegex(TrainerProtocolError, rf"cannot reach http://127.0.0.1:{port}/v1/stats: .*refused") as ctx:
            client.stats()
        self.assertIsNone(ctx.exception.status)

    def test_checks_its_arguments(self) -> None:
        with self.assertRaisesRegex(ValueError, "base_url: 'localhost:1' must be an http"):
            TrainerClient("localhost:1")
        with self.assertRaisesRegex(ValueError, "timeout: must be > 0"):
            TrainerClient("http://x", timeout=0)
        with self.assertRaisesRegex(ValueError, r"format: 'parquet' is not a batch format \(known: safetensors, arrow\)"):
            TrainerClient("http://x").next_batch("parquet")
        with self.assertRaisesRegex(TypeError, "policy_version: must be an int, got str"):
            TrainerClient("http://x").announce_weights("3", "/w")  # type: ignore[arg-type]


if __name__ == "__main__":
    unittest.main()
