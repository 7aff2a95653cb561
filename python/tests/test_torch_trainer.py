"""TorchTrainer and the train worker's step function: gradients against finite differences, clipping, Adam,
versions, checkpoints (HF layout, tokenizer files copied, Adam's state beside them), and batches without signal."""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import unittest

import numpy as np

try:
    import torch

    from arbor_client.hf_checkpoint import load_hf_checkpoint
    from arbor_client.torch_trainer import OPTIMIZER_FILE, TorchTrainer, micro_batches, sub_batch
    from arbor_client.train_worker import RunChanged, has_signal, make_step_fn, parse_args, run_dir
except ImportError:
    torch = None

from .torch_fixtures import GRPO, GSPO, tiny_batch, write_tiny_checkpoint

SKIP = "torch is not installed (run with /usr/bin/python3 or $ARBOR_PYTHON)"


@unittest.skipIf(torch is None, SKIP)
class TorchTrainerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="arbor-torch-trainer-")
        self.hf = write_tiny_checkpoint(os.path.join(self.dir, "hf"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_gradients_match_finite_differences(self):
        tr = TorchTrainer(self.hf, dtype=torch.float64)
        b = tiny_batch(GSPO)
        loss, lp, grads = tr.gradients(b)
        self.assertEqual(lp.shape, (3,))
        name, idx, h = "model.layers.1.self_attn.k_proj.weight", (3, 5), 1e-6
        p = tr.model.params[name]
        with torch.no_grad():
            p[idx] += h
        up, _, _ = tr.gradients(b)
        with torch.no_grad():
            p[idx] -= 2 * h
        down, _, _ = tr.gradients(b)
        self.assertAlmostEqual(grads[name][idx], (up - down) / (2 * h), delta=1e-6 * max(1.0, abs(grads[name][idx])))
        self.assertNotEqual(grads[name][idx], 0.0)

    def test_tree_and_flat_layouts_agree(self):
        tr = TorchTrainer(self.hf, dtype=torch.float64)
        b = tiny_batch(GRPO)
        lt, pt, gt = tr.gradients(b, "tree")
        lf, pf, gf = tr.gradients(b, "flat")
        self.assertAlmostEqual(lt, lf, places=12)
        np.testing.assert_allclose(pt, pf, atol=1e-12)
        for name in gt:
            np.testing.assert_allclose(gt[name], gf[name], atol=1e-12, err_msg=name)

    def test_entropy_is_each_terms_full_softmax_entropy_in_both_layouts_and_micro_batches(self):
        tr = TorchTrainer(self.hf, dtype=torch.float64)
        b = tiny_batch(GRPO)
        vocab = tr.model.config.vocab_size
        # Independently: every token's logprob at the term's row (sample A's path, rows 1 and 2), then −Σ p log p.
        path = np.asarray([0, 1, 2, 3])
        want = []
        for row in (1, 2):
            lp = tr.model.flat_logprobs(b.tokens, b.positions, [path], [row] * vocab, [0] * vocab, list(range(vocab))).detach().numpy()
            self.assertAlmostEqual(float(np.exp(lp).sum()), 1.0, places=12)
            want.append(float(-(np.exp(lp) * lp).sum()))
        # Terms: (node 1 → 5) and (node 2 → 6) of A, (node 1 → 7) of B, which shares node 1's prefix with A.
        expected = np.asarray([want[0], want[1], want[0]])
        for layout in ("tree", "flat"):
            np.testing.assert_allclose(tr.entropy(b, layout), expected, rtol=1e-12, err_msg=layout)
        split = TorchTrainer(self.hf, dtype=torch.float64, max_pass_tokens=3)
        np.testing.assert_allclose(split.entropy(b), expected, rtol=1e-12)
        self.assertTrue(np.all(expected > 0) and np.all(expected < np.log(vocab)))
        # A step reports their mean, read before the weights move.
        loss, _, _ = tr.gradients(b)
        r = tr.step(b)
        self.assertAlmostEqual(r["entropy"], float(expected.mean()), places=12)
        self.assertAlmostEqual(r["loss"], loss, places=12)

    def test_micro_batches_sum_to_the_whole_batch(self):
        whole = TorchTrainer(self.hf, dtype=torch.float64)
        split = TorchTrainer(self.hf, dtype=torch.float64, max_pass_tokens=3)
        for spec in (GRPO, GSPO):
            b = tiny_batch(spec)
            for layout in ("tree", "flat"):
                self.assertEqual(len(micro_batches(b, layout, 3)), 2)
                lw, pw, gw = whole.gradients(b, layout)
                ls, ps, gs = split.gradients(b, layout)
                self.assertAlmostEqual(lw, ls, places=12)
                np.testing.assert_allclose(pw, ps, atol=1e-12)
                for name in gw:
                    np.testing.assert_allclose(gw[name], gs[name], atol=1e-12, err_msg=name)

    def test_sub_batch_is_the_samples_subtree(self):
        sub, terms = sub_batch(tiny_batch(GRPO), [1])
        self.assertEqual(terms.tolist(), [2])
        self.assertEqual((sub.tokens.tolist(), sub.parents.tolist(), sub.positions.tolist()), ([3, 4, 7], [-1, 0, 1], [0, 1, 2]))
        self.assertEqual((sub.term_node.tolist(), sub.term_target.tolist(), sub.term_sample.tolist()), ([1], [7], [0]))
        self.assertEqual((sub.sample_offsets.tolist(), sub.sample_paths.tolist()), ([0, 3], [0, 1, 2]))

    def test_step_clips_then_adam_and_saves_policy_dirs(self):
        tr = TorchTrainer(self.hf, lr=1e-2, max_grad_norm=1e-3, version=7)
        b = tiny_batch(GRPO)
        _, _, grads = tr.gradients(b)
        norm = float(np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads.values())))
        before = {k: v.clone() for k, v in tr.tensors().items()}
        r = tr.step(b)
        self.assertEqual(r["version"], 8)
        self.assertEqual(tr.version, 8)
        self.assertAlmostEqual(r["grad_norm"], norm, delta=1e-6 * norm)
        self.assertGreater(r["grad_norm"], 1e-3)  # so the step was clipped
        # Adam's first step moves every weight with a non-zero gradient by ≈ lr (sign of the gradient), however clipped.
        moved = (tr.tensors()["lm_head.weight"] - before["lm_head.weight"]).abs().max().item()
        self.assertAlmostEqual(moved, 1e-2, delta=1e-4)
        path = tr.save(os.path.join(self.dir, "out"))
        self.assertEqual(path, os.path.join(self.dir, "out", "policy-v8"))
        self.assertTrue(os.path.exists(os.path.join(path, "tokenizer.json")))
        back = load_hf_checkpoint(path)
        self.assertEqual(back.config, load_hf_checkpoint(self.hf).config)
        for k, v in tr.tensors().items():
            self.assertTrue(torch.equal(back.tensors[k], v), k)

    def test_a_trainer_started_from_a_saved_policy_dir_with_its_adam_state_takes_the_same_step(self):
        out = os.path.join(self.dir, "out")
        first = TorchTrainer(self.hf, lr=1e-2)
        first.step(tiny_batch(GRPO))
        v1 = first.save(out)
        self.assertTrue(os.path.exists(os.path.join(v1, OPTIMIZER_FILE)))
        first.step(tiny_batch(GSPO))
        # Started again from policy-v1/ (a resumed run): with the moments it steps as the uninterrupted trainer did.
        again = TorchTrainer(v1, lr=1e-2, version=1)
        # Parameters may load in another order than they were saved in (an HF export's and a saved policy dir's
        # differ): the moments go by name.
        again.model.params = dict(reversed(list(again.model.params.items())))
        again.optimizer = torch.optim.Adam(list(again.model.params.values()), lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
        again.load_optimizer_state(os.path.join(v1, OPTIMIZER_FILE))
        self.assertEqual(again.steps, 1)
        again.step(tiny_batch(GSPO))
        for k, v in first.tensors().items():
            self.assertTrue(torch.equal(again.tensors()[k], v), k)
        # Without them Adam's second step is a first step again: the weights differ.
        fresh = TorchTrainer(v1, lr=1e-2, version=1)
        fresh.step(tiny_batch(GSPO))
        self.assertFalse(torch.equal(fresh.tensors()["lm_head.weight"], first.tensors()["lm_head.weight"]))
        with self.assertRaisesRegex(ValueError, "not an Arbor optimizer state"):
            torch.save({"format": "other"}, os.path.join(self.dir, "x.pt"))
            again.load_optimizer_state(os.path.join(self.dir, "x.pt"))

    def test_rejects_batches_without_terms_and_bad_options(self):
        tr = TorchTrainer(self.hf)
        b = tiny_batch(GRPO)
        for key in ("term_node", "term_target", "term_sample", "term_unit", "term_advantage", "term_old_logprob", "term_weight"):
            setattr(b, key, getattr(b, key)[:0])
        with self.assertRaisesRegex(ValueError, "no loss terms"):
            tr.step(b)
        self.assertEqual(tr.version, 0)
        with self.assertRaisesRegex(ValueError, "layout"):
            TorchTrainer(self.hf, layout="dense")
        with self.assertRaisesRegex(ValueError, "lr must be > 0"):
            TorchTrainer(self.hf, lr=0)


@unittest.skipIf(torch is None, SKIP)
class TrainWorkerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="arbor-train-worker-")
        self.hf = write_tiny_checkpoint(os.path.join(self.dir, "hf"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_parse_args(self):
        a = parse_args(["--url", "http://127.0.0.1:8400", "--from", self.hf, "--out-dir", "o", "--batches", "2", "--layout", "flat"])
        self.assertEqual((a.url, a.from_dir, a.out_dir, a.lr, a.max_grad_norm, a.batches, a.poll_s, a.layout, a.dtype, a.max_pass_tokens, a.version), ("http://127.0.0.1:8400", self.hf, "o", 1e-3, 1.0, 2, 0.2, "flat", "float32", 4096, None))
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
            parse_args(["--url", "u", "--from", self.hf, "--out-dir", "o", "--lr", "-1"])

    def test_step_fn_steps_and_saves_or_skips_a_batch_without_signal(self):
        tr = TorchTrainer(self.hf, version=3)
        logs = []
        step = make_step_fn(tr, os.path.join(self.dir, "out"), logs.append)
        quiet = tiny_batch(GRPO, advantage=(0.0, 0.0, 1.0), weight=(0.25, 0.25, 0.0))
        self.assertFalse(has_signal(quiet))
        self.assertIsNone(step(quiet))
        self.assertEqual(tr.version, 3)
        b = tiny_batch(GRPO)
        self.assertTrue(has_signal(b))
        version, path, metrics = step(b)
        self.assertEqual(version, 4)
        self.assertEqual(sorted(metrics), ["entropy", "grad_norm", "loss"])
        # The step's mean term entropy: at most log(vocab), above 0 for a model that is not one-hot.
        self.assertGreater(metrics["entropy"], 0.0)
        self.assertEqual(path, os.path.abspath(os.path.join(self.dir, "out", "policy-v4")))
        self.assertTrue(os.path.exists(os.path.join(path, "config.json")))
        self.assertIn("without a step", logs[0])
        self.assertIn("policy v4", logs[1])

    def test_step_fn_saves_into_the_runs_folder_and_refuses_another_runs_batch(self):
        tr = TorchTrainer(self.hf, version=0)
        out = os.path.join(self.dir, "out")
        served = {"runId": "run/a", "policyVersion": 0, "modelPath": "/m/start.gguf"}
        step = make_step_fn(tr, out, lambda _: None, lambda: dict(served))
        version, path, _ = step(tiny_batch(GRPO))
        self.assertEqual((version, path), (1, os.path.abspath(os.path.join(out, "run_a", "policy-v1"))))
        self.assertEqual(run_dir(out, None), out)
        # The server's next run (a trainer-api's) starts from its own weights: no step, nothing written, a clear error.
        served.update(runId="run-b", policyVersion=0)
        with self.assertRaisesRegex(RunChanged, r"batch .* is of run run-b, not of run run/a this worker trained to policy v1; .*arbor hf export /m/start.gguf"):
            step(tiny_batch(GRPO))
        self.assertEqual(tr.version, 1)
        self.assertFalse(os.path.exists(os.path.join(out, "run-b")))


if __name__ == "__main__":
    unittest.main()
