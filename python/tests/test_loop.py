"""train_loop: the protocol's order (announce, then ack), skips, requeue on failure, bounds; TrainerClient's own checks.

The loop runs here against an in-memory recorder of the client's calls; src/batch/python-client.test.ts runs
it (and the client) against the real trainer server.
"""
from __future__ import annotations

import json
import socket
import sys
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock
from typing import List, Optional

from arbor_client.batch import Batch
from arbor_client.client import TrainerClient, TrainerProtocolError
from arbor_client.loop import train_loop

from .fixtures import read_bytes


class RecordingClient:
    """Hands out the given batches (None = an empty poll) and records every call in order."""

    base_url = "http://recorder"

    def __init__(self, batches: List[Optional[Batch]], fail_requeue: bool = False, fail_ack: bool = False) -> None:
        self.batches = list(batches)
        self.calls: List[tuple] = []
        self.fail_requeue = fail_requeue
        self.fail_ack = fail_ack

    def next_batch(self, format: str = "safetensors") -> Optional[Batch]:
        self.calls.append(("next", format))
        return self.batches.pop(0) if self.batches else None

    def announce_weights(self, version: int, path: str, batch_id: Optional[str] = None) -> dict:
        self.calls.append(("announce", version, path, batch_id))
        return {"ok": True}

    def ack(self, batch_id: str, metrics: Optional[dict] = None) -> None:
        self.calls.append(("ack", batch_id) if metrics is None else ("ack", batch_id, metrics))
        if self.fail_ack:
            raise TrainerProtocolError(f"trainer protocol: ack {batch_id}: HTTP 500", 500, "boom")

    def heartbeat(self, batch_id: str) -> None:
        self.calls.append(("heartbeat", batch_id))

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
            [("next", "safetensors"), ("announce", 1, "/w/v1", "b1"), ("ack", "b1"), ("next", "safetensors"), ("next", "safetensors"), ("ack", "b2"),
             ("next", "safetensors"), ("announce", 2, "/w/v2", "b3"), ("ack", "b3")],
        )
        self.assertEqual(sleeps, [0.5])
        self.assertEqual((summary.batch_ids, summary.versions, summary.skipped, summary.empty_polls, summary.batches), (["b1", "b2", "b3"], [1, 2], 1, 1, 3))

    def test_a_steps_metrics_travel_with_its_ack(self) -> None:
        client = RecordingClient([batch("b1"), batch("b2")])
        steps = iter([(1, "/w/v1", {"loss": 0.5, "grad_norm": 2.0, "entropy": 1.25}), None])
        train_loop(client, lambda b: next(steps), batches=2)
        self.assertEqual(
            client.calls,
            [("next", "safetensors"), ("announce", 1, "/w/v1", "b1"), ("ack", "b1", {"loss": 0.5, "grad_norm": 2.0, "entropy": 1.25}), ("next", "safetensors"), ("ack", "b2")],
        )

    def test_heartbeats_while_a_step_runs_and_stops_at_its_end(self) -> None:
        client = RecordingClient([batch("b1"), batch("b2")])

        def step(b: Batch):
            # A long step: the loop's thread says the trainer is alive meanwhile.
            deadline = threading.Event()
            for _ in range(200):
                if sum(1 for c in client.calls if c == ("heartbeat", b.batch_id)) >= 2:
                    break
                deadline.wait(0.01)
            return None

        train_loop(client, step, batches=2, heartbeat_s=0.02)
        beats = [c for c in client.calls if c[0] == "heartbeat"]
        self.assertGreaterEqual(beats.count(("heartbeat", "b1")), 2)
        self.assertGreaterEqual(beats.count(("heartbeat", "b2")), 2)
        # No heartbeat for a batch after its ack.
        for b in ("b1", "b2"):
            ack = client.calls.index(("ack", b))
            self.assertNotIn(("heartbeat", b), client.calls[ack + 1 :])

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

    def test_an_unknown_metric_is_an_error_before_the_announcement_and_the_batch_goes_back(self) -> None:
        client = RecordingClient([batch("b1")])
        with self.assertRaisesRegex(ValueError, r"metrics: 'clip_fraction' is not a metric the server records \(known: loss, grad_norm, entropy\)"):
            train_loop(client, lambda b: (1, "/w/v1", {"loss": 0.1, "clip_fraction": 0.02}), batches=1)
        self.assertEqual(client.calls, [("next", "safetensors"), ("requeue", "b1")])
        client = RecordingClient([batch("b2")])
        with self.assertRaisesRegex(ValueError, "metrics: 'loss' must be a number, got str"):
            train_loop(client, lambda b: (1, "/w/v1", {"loss": "low"}), batches=1)
        self.assertEqual(client.calls, [("next", "safetensors"), ("requeue", "b2")])

    def test_a_failed_ack_after_the_announcement_is_followed_by_a_requeue(self) -> None:
        # The server answers that requeue by acking the batch without metrics: it is not left in flight.
        client = RecordingClient([batch("b1")], fail_ack=True)
        with self.assertRaisesRegex(TrainerProtocolError, "ack b1: HTTP 500"):
            train_loop(client, lambda b: (1, "/w/v1", {"loss": 0.5}), batches=1)
        self.assertEqual(client.calls, [("next", "safetensors"), ("announce", 1, "/w/v1", "b1"), ("ack", "b1", {"loss": 0.5}), ("requeue", "b1")])

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


class ScriptedServer:
    """A real HTTP server answering each path with a fixed (status, headers, body); records every request."""

    def __init__(self, routes):
        self.routes = routes
        self.requests: List[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                outer.requests.append(f"{self.command} {self.path}")
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                status, headers, body = outer.routes.get(f"{self.command} {self.path.split('?')[0]}", (404, {}, b'{"error":"no route"}'))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, *args) -> None:  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class TrainerClientTest(unittest.TestCase):
    def test_an_unreadable_batch_is_given_back_before_the_error(self) -> None:
        routes = {
            "GET /v1/batches/next": (200, {"x-arbor-batch-id": "bad/1"}, b"not safetensors"),
            "POST /v1/batches/bad%2F1/requeue": (200, {}, b'{"ok":true}'),
        }
        with ScriptedServer(routes) as server:
            with self.assertRaisesRegex(ValueError, "safetensors batch: safetensors: header length"):
                TrainerClient(server.url).next_batch()
            self.assertEqual(server.requests, ["GET /v1/batches/next?format=safetensors", "POST /v1/batches/bad%2F1/requeue"])

    def test_arrow_without_pyarrow_fails_before_taking_a_batch(self) -> None:
        with ScriptedServer({}) as server:
            with mock.patch.dict(sys.modules, {"pyarrow": None}):
                with self.assertRaisesRegex(ImportError, r"next_batch\(format='arrow'\) needs pyarrow"):
                    TrainerClient(server.url).next_batch("arrow")
            self.assertEqual(server.requests, [])

    def test_server_errors_carry_status_and_text(self) -> None:
        routes = {
            "POST /v1/weights": (409, {"content-type": "application/json"}, json.dumps({"error": "policy_version: stale"}).encode()),
            "GET /v1/stats": (500, {}, b"<html>boom</html>"),
        }
        with ScriptedServer(routes) as server:
            client = TrainerClient(server.url)
            with self.assertRaises(TrainerProtocolError) as ctx:
                client.announce_weights(3, "/w")
            self.assertEqual((ctx.exception.status, ctx.exception.error, str(ctx.exception)), (409, "policy_version: stale", "trainer protocol: POST /v1/weights: HTTP 409 (policy_version: stale)"))
            with self.assertRaises(TrainerProtocolError) as ctx:
                client.stats()
            self.assertEqual((ctx.exception.status, str(ctx.exception)), (500, "trainer protocol: GET /v1/stats: HTTP 500"))

    def test_unreachable_server_is_a_protocol_error_saying_so(self) -> None:
        # A port nothing listens on: bind one, then close it.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        client = TrainerClient(f"http://127.0.0.1:{port}", timeout=5)
        with self.assertRaisesRegex(TrainerProtocolError, rf"cannot reach http://127.0.0.1:{port}/v1/stats: .*refused") as ctx:
            client.stats()
        self.assertIsNone(ctx.exception.status)

    def test_an_ack_with_an_unknown_metric_sends_nothing(self) -> None:
        with ScriptedServer({}) as server:
            with self.assertRaisesRegex(ValueError, "metrics: 'clip_fraction' is not a metric"):
                TrainerClient(server.url).ack("b1", {"loss": 1.0, "clip_fraction": 0.5})
            self.assertEqual(server.requests, [])

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
