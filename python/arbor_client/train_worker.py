"""The PyTorch reference external trainer: ``python -m arbor_client.train_worker --url URL --out-dir DIR
[--from HF_DIR --lr 1e-3 --max-grad-norm 1 --batches N --poll-s 0.2 --layout tree|flat --dtype float32|float64
--max-pass-tokens 4096 --version N]``.

It starts from the weights the engines serve, at the server's current policy version: a Hugging Face checkpoint
folder, so by default the server's ``modelPath`` where that is one (or was converted from or to one beside it), else
``--from`` (``arbor hf export`` of the GGUF the engines serve). A ``--from`` that is not the server's weights at a
version above 0 (neither its ``modelPath`` nor the ``policy-v{N}/`` this worker wrote for that version) is refused
(status 2), saying what to pass: training other weights than the engines serve would announce a policy that never
learnt from what they sampled. Then it loops over the trainer protocol (docs/batch-schema.md): next batch → one
TorchTrainer step → ``policy-v{N}/`` in ``--out-dir``/<run id> (the run the server names: runs never share a folder,
as with ``arbor train-worker``) → announce → ack. A batch in which no term has a non-zero advantage·weight teaches
nothing: it is acked without a step or an announcement. A batch of another run than the worker's first (a
trainer-api's next run) is given back and the worker exits (status 2) saying so: that run starts from its own
weights, so the worker must be started again with them. ``arbor hf convert`` turns a ``policy-v{N}/`` directory
into the GGUF an engine loads.

SIGTERM or SIGINT stops it as they stop ``arbor train-worker``, with the shell's status for the signal (143, 130): a
batch being stepped on is given back to the server (``requeue``) at once; one whose weights are being announced is
announced and acked first (a batch whose weights were announced cannot go back: the server refuses with 409 and acks
it without metrics), and a second signal stops at once.

Without ``--batches`` it runs until the server is gone (the run is over: its next poll finds nobody), then exits 0,
as ``arbor train-worker``; a server gone before any batch was acked, or another protocol failure, is one line on
stderr and status 1.

Argument parsing (:func:`parse_args`) and the step function (:func:`make_step_fn`) work without a server.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

from .client import TrainerProtocolError
from .torch_trainer import DEFAULT_MAX_PASS_TOKENS, LAYOUTS, OPTIMIZER_FILE, TorchTrainer

__all__ = ["parse_args", "has_signal", "run_dir", "RunChanged", "Interrupted", "make_step_fn", "main"]

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The worker's options (``argv`` defaults to ``sys.argv[1:]``); exits with a usage message on bad input."""
    p = argparse.ArgumentParser(prog="python -m arbor_client.train_worker", description="PyTorch reference trainer for Arbor's trainer protocol")
    p.add_argument("--url", required=True, help="trainer protocol server, e.g. http://127.0.0.1:8400")
    p.add_argument("--from", dest="from_dir", default=None, help="Hugging Face checkpoint directory of the weights the engines serve (default: the server's modelPath, where it is one)")
    p.add_argument("--out-dir", required=True, help="where policy-v{N}/ checkpoints are written")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--max-grad-norm", type=float, default=1.0, help="global gradient-norm limit (default 1)")
    p.add_argument("--batches", type=int, default=None, help="stop after N batches are acked (default: run until stopped)")
    p.add_argument("--poll-s", type=float, default=0.2, help="seconds between polls while no batch is queued (default 0.2)")
    p.add_argument("--layout", choices=LAYOUTS, default="tree", help="prefix tree (default) or every sample separately")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="training precision (default float32)")
    p.add_argument("--max-pass-tokens", type=int, default=DEFAULT_MAX_PASS_TOKENS, help=f"tokens per forward/backward pass; larger batches are split by sample and their gradients summed (default {DEFAULT_MAX_PASS_TOKENS})")
    p.add_argument("--version", type=int, default=None, help="policy version of --from, trusted without checking --from against the server's weights (default: the server's current version)")
    args = p.parse_args(argv)
    if not args.lr > 0:
        p.error(f"--lr must be > 0, got {args.lr}")
    if not args.max_grad_norm > 0:
        p.error(f"--max-grad-norm must be > 0, got {args.max_grad_norm}")
    if args.batches is not None and args.batches < 1:
        p.error(f"--batches must be >= 1, got {args.batches}")
    if not args.poll_s >= 0:
        p.error(f"--poll-s must be >= 0, got {args.poll_s}")
    if args.max_pass_tokens < 1:
        p.error(f"--max-pass-tokens must be >= 1, got {args.max_pass_tokens}")
    if args.version is not None and args.version < 0:
        p.error(f"--version must be >= 0, got {args.version}")
    return args


def has_signal(batch: object) -> bool:
    """Whether some term of ``batch`` has a non-zero advantage·weight (otherwise a step changes nothing)."""
    adv = np.asarray(getattr(batch, "term_advantage"), dtype=np.float64)
    weight = np.asarray(getattr(batch, "term_weight"), dtype=np.float64)
    return bool(np.any(adv * weight != 0))


def run_dir(out_dir: str, run_id: Optional[str]) -> str:
    """Where a run's checkpoints go: ``<out_dir>/<run id>/`` (characters other than letters, digits, ``.``, ``_`` and
    ``-`` made ``_``), or ``out_dir`` itself when the server names no run."""
    return out_dir if not run_id else os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]", "_", run_id))


class RunChanged(RuntimeError):
    """The server serves another run's batches than the worker trained on: its weights are not that run's."""


class Interrupted(BaseException):
    """SIGTERM or SIGINT reached the worker. A BaseException, as KeyboardInterrupt: a step's ``except Exception``
    must not swallow it, and ``train_loop`` gives the batch in hand back on any exception."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"received {signal.Signals(signum).name}")
        self.signum = signum


class _Signals:
    """While entered: SIGTERM and SIGINT raise :class:`Interrupted` in the main thread, except while ``holding``
    (a batch's announcement and ack, or a pull, are under way), when the first one is only recorded (``signum``)
    for the worker to stop at the next safe point; a second one raises at once. The previous handlers come back
    on exit."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.holding = False
        self._prior: Dict[int, Any] = {}

    def __enter__(self) -> "_Signals":
        for sig in self.SIGNALS:
            self._prior[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, prior in self._prior.items():
            signal.signal(sig, prior)

    def _on_signal(self, signum: int, _frame: object) -> None:
        first = self.signum is None
        self.signum = signum
        if first and self.holding:
            return
        raise Interrupted(signum)


class _WorkerClient:
    """The worker's client: a :class:`TrainerClient` whose calls that must not be cut in two defer a signal.

    A pull cut short after the server handed out a batch would leave it in flight for the whole lease, and so would
    an announcement cut short (the server refuses to requeue a batch whose weights are being announced). So a signal
    during a pull gives the pulled batch back and then stops the worker; one during an announcement lets it finish
    and the batch be acked (the loop's ``stop`` then ends the loop before the next pull).
    """

    def __init__(self, client: Any, signals: _Signals) -> None:
        self.client = client
        self.signals = signals
        #: Batches given back to the server (requeue accepted), in order.
        self.requeued: List[str] = []
        #: Batches acked.
        self.acked = 0
        #: Why a poll found the server gone after at least one ack (the loop's ``stop`` then ends the loop).
        self.gone: Optional[str] = None

    @property
    def base_url(self) -> str:
        return str(self.client.base_url)

    def next_batch(self, format: str = "safetensors") -> Any:
        self.signals.holding = True
        try:
            batch = self.client.next_batch(format=format)
        except TrainerProtocolError as e:
            # The run is over once it served a batch: its server closed (refused, or 503 while closing).
            if not (self.acked > 0 and (e.status is None or e.status == 503)):
                raise
            self.gone = str(e)
            return None
        finally:
            self.signals.holding = False
        if self.signals.signum is not None and batch is not None:
            # Pulled as the signal came: back to the server untouched (with no batch, the loop's stop ends it).
            self.requeue(batch.batch_id)
            raise Interrupted(self.signals.signum)
        return batch

    def announce_weights(self, policy_version: int, model_path: str, batch_id: Optional[str] = None) -> Dict[str, Any]:
        # Held from here through the batch's ack: the engines serve these weights, so the batch must count as trained.
        self.signals.holding = True
        try:
            return dict(self.client.announce_weights(policy_version, model_path, batch_id=batch_id))
        except BaseException:
            self.signals.holding = False
            raise

    def ack(self, batch_id: str, metrics: Optional[Dict[str, float]] = None) -> None:
        self.signals.holding = True
        try:
            if metrics is None:
                self.client.ack(batch_id)
            else:
                self.client.ack(batch_id, metrics)
            self.acked += 1
        finally:
            self.signals.holding = False

    def requeue(self, batch_id: str) -> None:
        self.client.requeue(batch_id)
        self.requeued.append(batch_id)

    def heartbeat(self, batch_id: str) -> None:
        self.client.heartbeat(batch_id)

    def stats(self) -> Dict[str, Any]:
        return dict(self.client.stats())


class WrongWeights(RuntimeError):
    """The worker would start from other weights than the engines serve, or cannot load theirs."""


def _hf_dir(path: str) -> Optional[str]:
    """The Hugging Face checkpoint folder of a served ``modelPath``: itself, or the conversion beside it (the run
    writes ``policy-v3.gguf`` from ``policy-v3/`` and ``policy-v3.gguf.hf/`` from ``policy-v3.gguf``); None if none."""
    candidates = [path, path + ".hf"] + ([path[: -len(".gguf")]] if path.endswith(".gguf") else [])
    return next((c for c in candidates if os.path.isfile(os.path.join(c, "config.json"))), None)


def start_weights(from_dir: Optional[str], served: Dict[str, Any], out_dir: str) -> str:
    """The checkpoint folder to start from, given ``--from`` and the server's GET /v1/stats: the server's weights when
    ``from_dir`` is None; ``from_dir`` at version 0 (the run's model, exported to HF: nothing to compare it with) or
    when it is the server's weights or this worker's ``policy-v{N}/`` of the server's version. Raises
    :class:`WrongWeights` saying what to pass otherwise."""
    version = int(served.get("policyVersion") or 0)
    model = served.get("modelPath")
    serving = _hf_dir(model) if isinstance(model, str) and model else None
    mine = os.path.join(run_dir(out_dir, served.get("runId")), f"policy-v{version}")
    if from_dir is None:
        if serving is None:
            raise WrongWeights(
                f"train-worker: the server serves {model or 'no model path'} at policy version {version}, which this worker cannot load "
                f"(it loads Hugging Face checkpoint folders): pass --from DIR, its export (`arbor hf export {model or '<gguf>'} DIR`)"
            )
        return serving
    if version == 0:
        return from_dir
    same = {os.path.realpath(p) for p in (serving, mine) if p is not None and os.path.isdir(p)}
    if os.path.realpath(from_dir) not in same:
        if serving is not None:
            what = f"pass --from {serving} (or leave --from out)"
        elif os.path.isdir(mine):
            what = f"pass --from {mine}"
        else:
            what = f"pass --from DIR, the export of those weights (`arbor hf export {model} DIR`)"
        raise WrongWeights(
            f"train-worker: --from {from_dir} is not the weights the server serves at policy version {version} ({model}): {what}; "
            f"--version N starts from --from at version N without this check"
        )
    return from_dir


def make_step_fn(
    trainer: TorchTrainer,
    out_dir: str,
    log: Callable[[str], None] = print,
    stats: Optional[Callable[[], Dict[str, Any]]] = None,
) -> Callable[[object], Optional[Tuple[int, str, Dict[str, float]]]]:
    """``step_fn(batch)`` for ``arbor_client.loop.train_loop``: None for a batch without signal, otherwise one
    step, a checkpoint in ``out_dir`` (``stats``: the server's GET /v1/stats, read at each batch — in the folder of
    the run it names, :func:`run_dir`) and ``(policy_version, absolute checkpoint path, metrics)``, the metrics
    (``loss``, ``grad_norm``, ``entropy``: the policy's mean token entropy before the step) for the ack. Raises
    :class:`RunChanged`, before stepping, for a batch of another run than the first batch's."""
    runs: List[Optional[str]] = []

    def step_fn(batch: object) -> Optional[Tuple[int, str, Dict[str, float]]]:
        batch_id = getattr(batch, "batch_id", "?")
        dest = out_dir
        if stats is not None:
            s = stats()
            run_id = s.get("runId")
            if not runs:
                runs.append(run_id)
            if run_id != runs[0]:
                raise RunChanged(
                    f"train-worker: batch {batch_id} is of run {run_id}, not of run {runs[0]} this worker trained to "
                    f"policy v{trainer.version}; it was given back. Start the worker again from that run's weights "
                    f"(`arbor hf export {s.get('modelPath')}`) at version {s.get('policyVersion')}"
                )
            dest = run_dir(out_dir, run_id)
        if not has_signal(batch):
            log(f"train-worker  batch {batch_id}: no term carries an advantage; acked without a step (policy v{trainer.version})")
            return None
        r = trainer.step(batch)
        path = os.path.abspath(trainer.save(dest))
        log(f"train-worker  batch {batch_id}: loss {r['loss']:.4f}  grad {r['grad_norm']:.3f}  entropy {r['entropy']:.3f}  {r['terms']} terms  policy v{r['version']} ({path})")
        return int(r["version"]), path, {"loss": float(r["loss"]), "grad_norm": float(r["grad_norm"]), "entropy": float(r["entropy"])}

    return step_fn


def main(argv: Optional[List[str]] = None) -> int:
    """Run the worker against a live server (uses ``arbor_client.client`` and ``arbor_client.loop``); returns its exit
    status (128 + the signal's number after SIGTERM or SIGINT)."""
    args = parse_args(argv)
    with _Signals() as signals:
        client = None
        try:
            from .client import TrainerClient

            client = _WorkerClient(TrainerClient(args.url), signals)
            return _work(args, client, signals)
        except WrongWeights as e:
            print(str(e), file=sys.stderr, flush=True)
            return 2
        except TrainerProtocolError as e:
            # The server's own words say what went wrong; where in the worker is not the question.
            print(f"train-worker: {e}" + "".join(f"; {n}" for n in getattr(e, "__notes__", [])), file=sys.stderr, flush=True)
            return 1
        except Interrupted as e:
            name = signal.Signals(e.signum).name
            notes = list(getattr(e, "__notes__", []))
            back = f"; batch {client.requeued[-1]} given back to the server" if client is not None and client.requeued else ""
            print(f"train-worker: {name}: stopped{back}" + "".join(f"; {n}" for n in notes), file=sys.stderr, flush=True)
            return 128 + e.signum


def _work(args: argparse.Namespace, client: _WorkerClient, signals: _Signals) -> int:
    from .loop import train_loop

    served = client.stats()
    version = args.version if args.version is not None else int(served.get("policyVersion", 0))
    # A third of the server's lease: a batch it hears nothing of for its lease goes to another trainer.
    lease_ms = served.get("leaseMs")
    heartbeat_s = lease_ms / 3000 if isinstance(lease_ms, (int, float)) and lease_ms > 0 else None
    # An explicit --version vouches for --from; otherwise --from must be what the engines serve at that version.
    from_dir = args.from_dir if args.version is not None and args.from_dir is not None else start_weights(args.from_dir, served, args.out_dir)
    trainer = TorchTrainer(from_dir, lr=args.lr, max_grad_norm=args.max_grad_norm, layout=args.layout, dtype=DTYPES[args.dtype], version=version, max_pass_tokens=args.max_pass_tokens)
    # A policy-v{N}/ this worker wrote holds Adam's state: a worker started again on a resumed run goes on with it.
    adam = os.path.join(from_dir, OPTIMIZER_FILE)
    resumed = os.path.exists(adam)
    if resumed:
        trainer.load_optimizer_state(adam)
    with_state = f" with its optimizer state ({adam})" if resumed else ""
    print(f"train-worker  {args.url}: training {from_dir} ({args.layout}, {args.dtype}) from policy version {version}{with_state}, checkpoints in {args.out_dir}", flush=True)
    step_fn = make_step_fn(trainer, args.out_dir, lambda s: print(s, flush=True), client.stats)
    try:
        # stop: a signal that came while a batch was announced and acked, or the server gone, ends the loop.
        summary = train_loop(client, step_fn, batches=args.batches, poll_s=args.poll_s, heartbeat_s=heartbeat_s, stop=lambda: signals.signum is not None or client.gone is not None)  # type: ignore[arg-type]
    except RunChanged as e:
        print(str(e), file=sys.stderr, flush=True)
        return 2
    if signals.signum is not None:
        why = f" (stopped by {signal.Signals(signals.signum).name})"
    elif client.gone is not None:
        print(f"train-worker  {args.url} is gone after {summary.batches} batch(es) ({client.gone}); stopping", flush=True)
        why = " (the run's trainer server is gone)"
    else:
        why = f" (--batches {args.batches} reached)"
    print(f"train-worker: {summary.batches} batch(es), {len(summary.versions)} step(s), policy v{trainer.version}{why}", flush=True)
    return 128 + signals.signum if signals.signum is not None else 0


if __name__ == "__main__":
    sys.exit(main())
