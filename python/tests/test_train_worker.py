"""``python -m arbor_client.train_worker``'s main() against a scripted server: how it stops (SIGTERM and SIGINT,
the server going away) and what it gives back to the server then.

The server is a stand-in for ``TrainerClient`` that records every call; signals are sent to the main thread
(``signal.pthread_kill``) from inside a call, so each lands at a known point of the protocol.
src/trainer/python-train-worker.test.ts runs the worker as a process against the real trainer server.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import tempfile
import threading
import time
import unittest
from typing import Any, Callable, Dict, List, Optional
from unittest import mock

try:
    import torch

    from arbor_client import train_worker
    from arbor_client.client import TrainerProtocolError
    from arbor_client.torch_trainer import TorchTrainer
except ImportError:
    torch = None

from .torch_fixtures import GRPO, tiny_batch, write_tiny_checkpoint

SKIP = "torch is not installed (run with /usr/bin/python3 or $ARBOR_PYTHON)"


def send(sig: int) -> None:
    """Deliver ``sig`` to the main thread now (its handler runs there before the next Python instruction)."""
    signal.pthread_kill(threading.main_thread().ident, sig)  # type: ignore[arg-type]


class ScriptedServer:
    """Stands in for TrainerClient: hands out ``batches`` (None = an empty poll; when they run out, the server is
    gone), records every call, and runs ``on[name]`` (if any) inside that call before answering."""

    base_url = "http://scripted"

    def __init__(self, batches: List[Any], served: Dict[str, Any], on: Optional[Dict[str, Callable[[], None]]] = None) -> None:
        self.batches = list(batches)
        self.served = served
        self.on = on or {}
        self.calls: List[tuple] = []

    def _call(self, *call: Any) -> None:
        self.calls.append(call)
        hook = self.on.get(call[0])
        if hook is not None:
            hook()

    def stats(self) -> Dict[str, Any]:
        self._call("stats")
        return dict(self.served)

    def next_batch(self, format: str = "safetensors") -> Any:
        self._call("next")
        if not self.batches:
            raise TrainerProtocolError(f"trainer protocol: cannot reach {self.base_url}/v1/batches/next: [Errno 111] Connection refused", None, "refused")
        return self.batches.pop(0)

    def announce_weights(self, version: int, path: str, batch_id: Optional[str] = None) -> Dict[str, Any]:
        self._call("announce", version, batch_id)
        self.served.update(policyVersion=version, modelPath=path)
        return {"ok": True, "policy_version": version}

    def ack(self, batch_id: str, metrics: Optional[Dict[str, float]] = None) -> None:
        self._call("ack", batch_id, sorted(metrics) if metrics else None)

    def requeue(self, batch_id: str) -> None:
        self._call("requeue", batch_id)
        if "announce" in [c[0] for c in self.calls]:
            raise TrainerProtocolError(
                f"trainer protocol: requeue {batch_id}: HTTP 409 (batch '{batch_id}': the weights trained on it are being announced)", 409, "being announced"
            )

    def heartbeat(self, batch_id: str) -> None:
        self._call("heartbeat", batch_id)


def batch(batch_id: str) -> Any:
    b = tiny_batch(GRPO)
    b.batch_id = batch_id
    return b


@unittest.skipIf(torch is None, SKIP)
class TrainWorkerMainTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="arbor-train-worker-main-")
        self.hf = write_tiny_checkpoint(os.path.join(self.dir, "hf"))
        self.out = os.path.join(self.dir, "out")
        self.prior = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def tearDown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_main(self, server: ScriptedServer, *extra: str, from_dir: Optional[str] = "") -> "tuple[int, str, str]":
        out, err = io.StringIO(), io.StringIO()
        start = self.hf if from_dir == "" else from_dir
        argv = ["--url", server.base_url, *(["--from", start] if start is not None else []), "--out-dir", self.out, "--poll-s", "0", *extra]
        with mock.patch("arbor_client.client.TrainerClient", lambda url: server), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = train_worker.main(argv)
        # Whatever happened, the process's own handlers are back.
        self.assertEqual({s: signal.getsignal(s) for s in self.prior}, self.prior)
        return code, out.getvalue(), err.getvalue()

    def served(self) -> Dict[str, Any]:
        return {"policyVersion": 0, "modelPath": self.hf, "runId": None, "leaseMs": None}

    def test_sigterm_mid_step_gives_the_batch_back_and_exits_143(self) -> None:
        server = ScriptedServer([batch("b1"), batch("b2")], self.served())
        step = TorchTrainer.step

        def interrupted_step(tr: TorchTrainer, b: Any) -> Any:
            send(signal.SIGTERM)
            time.sleep(30)  # a long step: the signal cuts it short
            return step(tr, b)

        with mock.patch.object(TorchTrainer, "step", interrupted_step):
            code, _, err = self.run_main(server)
        self.assertEqual(code, 143)
        self.assertEqual(server.calls, [("stats",), ("next",), ("stats",), ("requeue", "b1")])
        self.assertEqual(err.strip(), "train-worker: SIGTERM: stopped; batch b1 given back to the server")
        self.assertFalse(os.path.exists(os.path.join(self.out, "policy-v1")))

    def test_sigint_during_a_pull_gives_the_pulled_batch_back_and_exits_130(self) -> None:
        server = ScriptedServer([batch("b1")], self.served(), on={"next": lambda: send(signal.SIGINT)})
        code, _, err = self.run_main(server)
        self.assertEqual(code, 130)
        self.assertEqual(server.calls, [("stats",), ("next",), ("requeue", "b1")])
        self.assertIn("SIGINT: stopped; batch b1 given back", err)

    def test_a_signal_during_the_announcement_lets_it_finish_and_the_batch_be_acked_then_stops(self) -> None:
        server = ScriptedServer([batch("b1"), batch("b2")], self.served(), on={"announce": lambda: send(signal.SIGTERM)})
        code, out, err = self.run_main(server)
        self.assertEqual(code, 143)
        # The engines serve v1: b1 counts as trained, with its metrics; b2 is never pulled.
        self.assertEqual(server.calls, [("stats",), ("next",), ("stats",), ("announce", 1, "b1"), ("ack", "b1", ["entropy", "grad_norm", "loss"])])
        self.assertIn("train-worker: 1 batch(es), 1 step(s), policy v1 (stopped by SIGTERM)", out)
        self.assertEqual(err, "")

    def test_a_second_signal_during_the_announcement_stops_at_once_and_the_servers_409_is_said_not_raised(self) -> None:
        def twice() -> None:
            send(signal.SIGTERM)
            send(signal.SIGTERM)

        server = ScriptedServer([batch("b1")], self.served(), on={"announce": twice})
        code, _, err = self.run_main(server)
        self.assertEqual(code, 143)
        self.assertEqual(server.calls[-1], ("requeue", "b1"))
        self.assertNotIn("Traceback", err)
        self.assertEqual(len(err.strip().splitlines()), 1)
        self.assertIn("requeueing batch b1 failed too: trainer protocol: requeue b1: HTTP 409", err)

    def test_without_batches_it_runs_until_the_server_is_gone_and_exits_0(self) -> None:
        quiet = tiny_batch(GRPO, advantage=(0.0, 0.0, 0.0))
        quiet.batch_id = "b2"
        server = ScriptedServer([batch("b1"), None, quiet], self.served())
        code, out, err = self.run_main(server)
        self.assertEqual(code, 0, err)
        self.assertEqual(err, "")
        self.assertEqual([c for c in server.calls if c[0] in ("ack", "requeue")], [("ack", "b1", ["entropy", "grad_norm", "loss"]), ("ack", "b2", None)])
        lines = out.strip().splitlines()
        self.assertRegex(lines[-2], r"^train-worker  http://scripted is gone after 2 batch\(es\) \(trainer protocol: cannot reach .*refused\); stopping$")
        self.assertEqual(lines[-1], "train-worker: 2 batch(es), 1 step(s), policy v1 (the run's trainer server is gone)")

    def test_a_server_gone_before_any_batch_is_one_line_and_status_1(self) -> None:
        server = ScriptedServer([None], self.served())
        code, _, err = self.run_main(server)
        self.assertEqual(code, 1)
        self.assertEqual(err, "train-worker: trainer protocol: cannot reach http://scripted/v1/batches/next: [Errno 111] Connection refused\n")

    def policy(self, version: int, run: Optional[str] = None) -> str:
        """A checkpoint folder as this worker writes it for ``version`` (in ``run``'s folder of --out-dir)."""
        return write_tiny_checkpoint(os.path.join(self.out, run or "", f"policy-v{version}"), seed=version)

    def test_without_from_it_starts_from_the_weights_the_server_serves(self) -> None:
        served = dict(self.served(), policyVersion=2, modelPath=self.policy(2))
        server = ScriptedServer([batch("b1")], served)
        code, out, err = self.run_main(server, "--batches", "1", from_dir=None)
        self.assertEqual(code, 0, err)
        self.assertIn(f"training {self.policy(2)} (tree, float32) from policy version 2", out)
        self.assertIn(("announce", 3, "b1"), server.calls)

    def test_without_from_a_served_gguf_is_read_from_the_hf_folder_beside_it(self) -> None:
        # The run converted the announced policy-v2/ into policy-v2.gguf and reports that.
        folder = self.policy(2)
        served = dict(self.served(), policyVersion=2, modelPath=folder + ".gguf")
        code, out, err = self.run_main(ScriptedServer([batch("b1")], served), "--batches", "1", from_dir=None)
        self.assertEqual(code, 0, err)
        self.assertIn(f"training {folder} ", out)

    def test_without_from_a_served_gguf_it_cannot_load_is_refused_saying_what_to_pass(self) -> None:
        served = dict(self.served(), modelPath="/models/calc-sft.gguf")
        server = ScriptedServer([batch("b1")], served)
        code, _, err = self.run_main(server, from_dir=None)
        self.assertEqual(code, 2)
        self.assertEqual(err.strip(), "train-worker: the server serves /models/calc-sft.gguf at policy version 0, which this worker cannot load (it loads Hugging Face checkpoint folders): pass --from DIR, its export (`arbor hf export /models/calc-sft.gguf DIR`)")
        self.assertEqual(server.calls, [("stats",)])

    def test_a_from_that_is_not_the_served_version_is_refused_before_any_batch(self) -> None:
        # A restarted worker given the run's start weights while the engines serve v2: it would train stale weights.
        served = dict(self.served(), policyVersion=2, modelPath="/runs/r/policy-v2.gguf", runId="r")
        self.policy(2, run="r")
        server = ScriptedServer([batch("b1")], served)
        code, _, err = self.run_main(server)
        self.assertEqual(code, 2)
        mine = os.path.join(self.out, "r", "policy-v2")
        self.assertEqual(
            err.strip(),
            f"train-worker: --from {self.hf} is not the weights the server serves at policy version 2 (/runs/r/policy-v2.gguf): pass --from {mine}; "
            "--version N starts from --from at version N without this check",
        )
        self.assertEqual(server.calls, [("stats",)])
        # The checkpoint this worker wrote for v2 is accepted, and so is an explicit --version.
        code, out, err = self.run_main(ScriptedServer([batch("b1")], dict(served)), "--batches", "1", from_dir=mine)
        self.assertEqual(code, 0, err)
        code, out, err = self.run_main(ScriptedServer([batch("b1")], dict(served)), "--batches", "1", "--version", "2")
        self.assertEqual(code, 0, err)
        self.assertIn(f"training {self.hf} (tree, float32) from policy version 2", out)


if __name__ == "__main__":
    unittest.main()
