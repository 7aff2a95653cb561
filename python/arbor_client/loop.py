"""An external trainer's main loop over the trainer protocol, in the protocol's order (docs/batch-schema.md):

    pull a batch → step on it → announce the new weights (returns once the engines serve them) → ack it.

A step that brings no new weights (``step_fn`` returns None: e.g. no sample carries a non-zero advantage) is
acked without an announcement. A step may also return what it measured (``loss``, ``grad_norm``, ``entropy``):
the ack carries it to the run, whose metrics.jsonl records it as the in-process trainer's; they are checked against
the keys the server takes (``client.METRICS``) before the announcement, so a step's unknown metric is an error while
the batch can still go back. If the step, the announcement or the ack raises, the batch is requeued (it goes back
to the head of the server's queue, untrained as far as the rollout knows) and the error re-raised; after an
announcement the server refuses that requeue (409) and acks the batch without metrics instead, since the engines
serve what was learnt from it.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple, Union

from .batch import Batch
from .client import TrainerClient, TrainerProtocolError, check_metrics

__all__ = ["train_loop", "LoopSummary", "StepResult"]

#: What ``step_fn`` returns: the new weights ``(policy_version, model_path)``, optionally with the step's metrics
#: ``(policy_version, model_path, {"loss": …, "grad_norm": …, "entropy": …})``, or None when it learned nothing.
StepResult = Optional[Union[Tuple[int, str], Tuple[int, str, Dict[str, float]]]]


@dataclass
class LoopSummary:
    """What a :func:`train_loop` run did."""

    #: Batches acked, in order.
    batch_ids: List[str] = field(default_factory=list)
    #: Policy versions announced, in order (one per batch that brought new weights).
    versions: List[int] = field(default_factory=list)
    #: Batches acked without an announcement (``step_fn`` returned None).
    skipped: int = 0
    #: Polls that found no batch queued.
    empty_polls: int = 0

    @property
    def batches(self) -> int:
        """Number of batches acked."""
        return len(self.batch_ids)


def train_loop(
    client: TrainerClient,
    step_fn: Callable[[Batch], StepResult],
    *,
    batches: Optional[int] = None,
    poll_s: float = 0.2,
    stop: Optional[Callable[[], bool]] = None,
    idle_timeout_s: Optional[float] = None,
    format: str = "safetensors",
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    heartbeat_s: Optional[float] = None,
) -> LoopSummary:
    """Pull, step, announce, ack until ``batches`` batches are acked or ``stop()`` is true (checked before each pull).

    ``step_fn(batch)`` trains on the batch and returns ``(policy_version, model_path)`` of the weights it wrote,
    or None for nothing to learn. With neither ``batches`` nor ``stop`` the loop runs until an error.
    ``idle_timeout_s`` bounds the wait for a batch: no batch for that long raises :class:`TrainerProtocolError`.
    ``heartbeat_s``: while a batch is stepped on and its weights announced, a thread tells the server every that
    many seconds that the trainer still holds it (``client.heartbeat``): a server gives a batch it hears nothing of
    for its lease (``leaseMs`` in ``client.stats()``) to another trainer; a third of the lease is a good value.
    ``sleep`` and ``clock`` are injectable for tests. Returns a :class:`LoopSummary`.
    """
    if batches is not None and batches < 0:
        raise ValueError(f"batches: must be >= 0, got {batches}")
    if not poll_s >= 0:
        raise ValueError(f"poll_s: must be >= 0, got {poll_s}")
    if heartbeat_s is not None and not heartbeat_s > 0:
        raise ValueError(f"heartbeat_s: must be > 0, got {heartbeat_s}")
    summary = LoopSummary()
    idle_since = clock()
    while (batches is None or summary.batches < batches) and not (stop is not None and stop()):
        batch = client.next_batch(format=format)
        if batch is None:
            summary.empty_polls += 1
            if idle_timeout_s is not None and clock() - idle_since >= idle_timeout_s:
                raise TrainerProtocolError(
                    f"trainer protocol: no batch from {client.base_url} within {idle_timeout_s}s "
                    f"({summary.batches} acked so far, {summary.empty_polls} empty polls)"
                )
            sleep(poll_s)
            continue
        beats = _Heartbeats(client, batch.batch_id, heartbeat_s) if heartbeat_s is not None else None
        try:
            try:
                result = step_fn(batch)
                metrics: Optional[Dict[str, float]] = None
                if result is not None:
                    version, model_path = result[0], result[1]
                    metrics = result[2] if len(result) > 2 else None  # type: ignore[misc]
                    if metrics:
                        # Before the announcement: the server refuses an unknown metric only at the ack, when the
                        # engines serve the new weights already and the batch can no longer go back.
                        check_metrics(metrics)
                    client.announce_weights(version, model_path, batch_id=batch.batch_id)
            finally:
                if beats is not None:
                    beats.stop()
            if metrics:
                client.ack(batch.batch_id, metrics)
            else:
                client.ack(batch.batch_id)
        except BaseException as e:
            # Give the batch back before surfacing the error: the rollout must not wait for an ack that never comes.
            # After an announcement the server acks it without metrics instead (and answers 409).
            try:
                client.requeue(batch.batch_id)
            except TrainerProtocolError as requeue_error:
                e.add_note(f"requeueing batch {batch.batch_id} failed too: {requeue_error}")
            raise
        summary.batch_ids.append(batch.batch_id)
        if result is None:
            summary.skipped += 1
        else:
            summary.versions.append(result[0])
        idle_since = clock()
    return summary


class _Heartbeats:
    """Heartbeats for one batch from a daemon thread every ``every_s`` seconds until :meth:`stop` (a failed one is
    left to the batch's ack or requeue to report)."""

    def __init__(self, client: TrainerClient, batch_id: str, every_s: float) -> None:
        self._stopped = threading.Event()

        def beat() -> None:
            while not self._stopped.wait(every_s):
                try:
                    client.heartbeat(batch_id)
                except TrainerProtocolError:
                    pass

        self._thread = threading.Thread(target=beat, name=f"heartbeat {batch_id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
