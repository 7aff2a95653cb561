"""Client of Arbor's trainer protocol (src/batch/trainer-server.ts, docs/batch-schema.md) over urllib alone.

A trainer pulls a batch (``next_batch``), steps on it, announces the weights it wrote (``announce_weights``,
which returns once every engine serves them) and only then acks the batch (``ack``); one that must stop
before the ack gives the batch back (``requeue``). ``arbor_client.loop.train_loop`` keeps that order.
"""
from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Optional

from .batch import Batch

__all__ = ["TrainerClient", "TrainerProtocolError", "FORMATS", "METRICS", "check_metrics"]

#: Batch formats the server answers: safetensors needs numpy only, arrow needs pyarrow.
FORMATS = ("safetensors", "arrow")

#: The metrics an ack may carry (the server's AckSchema, src/batch/trainer-server.ts): any other is a 400.
METRICS = ("loss", "grad_norm", "entropy")


def check_metrics(metrics: Dict[str, Any]) -> Dict[str, Optional[float]]:
    """``metrics`` as an ack sends them (a non-finite value or None as null); raises ValueError naming a key the
    server does not take or a value that is not a number, before anything is sent."""
    clean: Dict[str, Optional[float]] = {}
    for key, value in metrics.items():
        if key not in METRICS:
            raise ValueError(f"metrics: '{key}' is not a metric the server records (known: {', '.join(METRICS)}); the ack would be refused (400)")
        if value is None:
            clean[key] = None
            continue
        if isinstance(value, (bool, str, bytes)):
            raise ValueError(f"metrics: '{key}' must be a number, got {type(value).__name__}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"metrics: '{key}' must be a number, got {type(value).__name__}") from None
        clean[key] = number if math.isfinite(number) else None
    return clean


class TrainerProtocolError(RuntimeError):
    """A refused or failed protocol call: ``status`` is the HTTP status (None when the server was not reached)
    and ``error`` the server's ``error`` text (or the reason it could not be reached)."""

    def __init__(self, message: str, status: Optional[int] = None, error: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.error = error


class TrainerClient:
    """Client of one trainer protocol server, e.g. ``TrainerClient("http://127.0.0.1:8400")``.

    ``timeout`` (seconds) bounds every request: connecting and each read.
    """

    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url: '{base_url}' must be an http:// or https:// URL")
        if not timeout > 0:
            raise ValueError(f"timeout: must be > 0 seconds, got {timeout}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    # ------------------------------------------------------------------------------------------- protocol

    def next_batch(self, format: str = "safetensors") -> Optional[Batch]:
        """The next batch (now in flight on the server), or None when none is queued.

        ``format="safetensors"`` reads the prefix tree with numpy alone; ``"arrow"`` reads the Arrow file and
        needs pyarrow. Both give the same :class:`Batch`.
        """
        if format not in FORMATS:
            raise ValueError(f"format: '{format}' is not a batch format (known: {', '.join(FORMATS)})")
        if format == "arrow":
            # Checked before asking: a batch taken and then unreadable here would sit in flight on the server.
            try:
                import pyarrow  # noqa: F401
            except ImportError as e:
                raise ImportError("next_batch(format='arrow') needs pyarrow (pip install pyarrow); format='safetensors' needs numpy only") from e
        what = f"GET /v1/batches/next?format={format}"
        status, headers, body = self._request("GET", f"/v1/batches/next?format={format}", what)
        if status == 204:
            return None
        header = headers.get("x-arbor-batch-id")
        try:
            batch = Batch.from_safetensors(body) if format == "safetensors" else Batch.from_arrow(body)
            if header != batch.batch_id:
                raise TrainerProtocolError(f"trainer protocol: {what}: batch id header '{header}' differs from the file's '{batch.batch_id}'", status)
        except Exception as e:
            # Unreadable here: give it back rather than leave it in flight until the rollout's wait runs out.
            if header:
                try:
                    self.requeue(header)
                except TrainerProtocolError as requeue_error:
                    e.add_note(f"requeueing batch {header} failed too: {requeue_error}")
            raise
        return batch

    def ack(self, batch_id: str, metrics: Optional[Dict[str, float]] = None) -> None:
        """Mark an in-flight batch as trained on (after announcing the weights trained on it, if any).

        ``metrics``: what the step measured (``loss``, ``grad_norm``, ``entropy``; docs/batch-schema.md), sent as
        the ack's JSON body ``{"metrics": {...}}`` so the run records them; a non-finite value is sent as null, and
        another key is a ValueError before anything is sent (:func:`check_metrics`).
        """
        body = None
        if metrics:
            body = json.dumps({"metrics": check_metrics(metrics)}).encode()
        self._request("POST", f"/v1/batches/{_quote(batch_id)}/ack", f"ack {batch_id}", body)

    def requeue(self, batch_id: str) -> None:
        """Give an in-flight batch back untrained: it returns to the head of the queue."""
        self._request("POST", f"/v1/batches/{_quote(batch_id)}/requeue", f"requeue {batch_id}")

    def heartbeat(self, batch_id: str) -> None:
        """The trainer still works on a batch it took: the server keeps it out with this trainer (its lease,
        ``leaseMs`` in :meth:`stats`, starts again); 404 once the batch is no longer this trainer's."""
        self._request("POST", f"/v1/batches/{_quote(batch_id)}/heartbeat", f"heartbeat {batch_id}")

    def announce_weights(self, policy_version: int, model_path: str, batch_id: Optional[str] = None) -> Dict[str, Any]:
        """Announce new weights, trained on ``batch_id`` when given; returns once the server's hook (the engines'
        weight load) has succeeded.

        ``policy_version`` must exceed the server's current one (409 otherwise, and for a ``batch_id`` no longer out
        with a trainer); 502 when the engines refuse.
        """
        if isinstance(policy_version, bool) or not isinstance(policy_version, int):
            raise TypeError(f"policy_version: must be an int, got {type(policy_version).__name__}")
        fields: Dict[str, Any] = {"policy_version": policy_version, "model_path": model_path}
        if batch_id is not None:
            fields["batch_id"] = batch_id
        body = json.dumps(fields).encode()
        _, _, answer = self._request("POST", "/v1/weights", "POST /v1/weights", body)
        return _json(answer, "POST /v1/weights")

    def stats(self) -> Dict[str, Any]:
        """The server's counters (``queued``, ``inFlight``, ``acked``, …), ``policyVersion``, ``modelPath``, ``runId``
        and ``leaseMs``."""
        _, _, body = self._request("GET", "/v1/stats", "GET /v1/stats")
        return _json(body, "GET /v1/stats")

    # ------------------------------------------------------------------------------------------- HTTP

    def _request(self, method: str, path: str, what: str, body: Optional[bytes] = None) -> "tuple[int, Dict[str, str], bytes]":
        url = f"{self.base_url}{path}"
        headers = {"content-type": "application/json"} if body is not None else {}
        # No body and no content type on ack/requeue: http.client sends "content-length: 0" for a bare POST, and
        # fastify refuses a JSON (or urllib's default form) content type with an empty body.
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                return res.status, {k.lower(): v for k, v in res.headers.items()}, res.read()
        except urllib.error.HTTPError as e:
            detail = ""
            try:
                detail = str(json.loads(e.read() or b"{}").get("error", ""))
            except (ValueError, AttributeError):
                pass  # not JSON: the status says enough
            raise TrainerProtocolError(f"trainer protocol: {what}: HTTP {e.code}" + (f" ({detail})" if detail else ""), e.code, detail) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise TrainerProtocolError(f"trainer protocol: cannot reach {url}: {reason}", None, str(reason)) from None


def _quote(batch_id: str) -> str:
    return urllib.parse.quote(batch_id, safe="")


def _json(body: bytes, what: str) -> Dict[str, Any]:
    try:
        out = json.loads(body)
    except ValueError as e:
        raise TrainerProtocolError(f"trainer protocol: {what}: the answer is not JSON: {e}") from None
    if not isinstance(out, dict):
        raise TrainerProtocolError(f"trainer protocol: {what}: the answer is not a JSON object")
    return out
