"""torch_llama: RoPE tables, tree attention against per-sample causal runs, GQA/tied heads, input checks."""
from __future__ import annotations

import math
import unittest

import numpy as np

try:
    import torch

    from arbor_client.torch_llama import LlamaConfig, TorchLlama, rope_tables, tree_visibility
    from arbor_client.torch_trainer import sample_paths_of
except ImportError:
    torch = None

from .torch_fixtures import CONFIG, GRPO, tiny_batch, tiny_tensors

SKIP = "torch is not installed (run with /usr/bin/python3 or $ARBOR_PYTHON)"


def model(tied: bool = False, dtype=None):
    tensors = {k: torch.from_numpy(v) for k, v in tiny_tensors(1, tied).items()}
    return TorchLlama(LlamaConfig.from_hf(dict(CONFIG, tie_word_embeddings=tied)), tensors, dtype or torch.float64)


@unittest.skipIf(torch is None, SKIP)
class RopeTest(unittest.TestCase):
    def test_angles_are_llama_cpp_float32_powers(self):
        cos, sin = rope_tables([0, 1, 5], 8, 10000.0)
        self.assertEqual(cos.shape, (3, 4))
        np.testing.assert_array_equal(cos[0], np.ones(4, dtype=np.float32))
        np.testing.assert_array_equal(sin[0], np.zeros(4, dtype=np.float32))
        s = np.float32(10000.0 ** -0.25)
        # θ_i at position 1 is s^i built by repeated float32 products: 1, s, s·s, s·s·s.
        theta = [np.float32(1.0), s, np.float32(s * s), np.float32(np.float32(s * s) * s)]
        np.testing.assert_array_equal(cos[1], np.cos(np.asarray(theta, dtype=np.float64)).astype(np.float32))
        self.assertAlmostEqual(float(sin[2, 0]), math.sin(5.0), places=6)


@unittest.skipIf(torch is None, SKIP)
class TreeTest(unittest.TestCase):
    def test_visibility_is_ancestors_and_self(self):
        vis = tree_visibility([-1, 0, 1, 2, 1, -1])
        self.assertEqual(vis[4].tolist(), [True, True, False, False, True, False])
        self.assertEqual(vis[5].tolist(), [False, False, False, False, False, True])
        with self.assertRaisesRegex(ValueError, "tree node 2 has parent 3"):
            tree_visibility([-1, 0, 3, 1])

    def test_tree_pass_equals_each_sample_alone(self):
        for tied in (False, True):
            m = model(tied)
            b = tiny_batch(GRPO)
            tree = m.tree_logprobs(b.tokens, b.parents, b.positions, b.term_node, b.term_target)
            flat = m.flat_logprobs(b.tokens, b.positions, sample_paths_of(b), b.term_node, b.term_sample, b.term_target)
            np.testing.assert_allclose(tree.detach().numpy(), flat.detach().numpy(), rtol=0, atol=1e-12)
            self.assertTrue(np.all(tree.detach().numpy() < 0))

    def test_wrong_positions_change_the_logprobs(self):
        # A fork node's position must be its depth: numbering nodes 0..n−1 instead moves B's term.
        m = model()
        b = tiny_batch(GRPO)
        right = m.tree_logprobs(b.tokens, b.parents, b.positions, [4], [2]).item()
        wrong = m.tree_logprobs(b.tokens, b.parents, [0, 1, 2, 3, 4], [4], [2]).item()
        self.assertGreater(abs(right - wrong), 1e-6)

    def test_causal(self):
        # Changing a later token leaves earlier positions' logprobs exactly as they were.
        m = model()
        tri = np.tri(4, dtype=bool)
        a = m.logprobs(m.hidden([3, 4, 5, 6], range(4), tri), [0, 1], [4, 5])
        b = m.logprobs(m.hidden([3, 4, 9, 1], range(4), tri), [0, 1], [4, 5])
        self.assertTrue(torch.equal(a, b))

    def test_logprobs_normalise(self):
        m = model()
        h = m.hidden([1, 2, 3], range(3), np.tri(3, dtype=bool))
        total = sum(math.exp(m.logprobs(h, [2], [t]).item()) for t in range(12))
        self.assertAlmostEqual(total, 1.0, places=12)


@unittest.skipIf(torch is None, SKIP)
class ChecksTest(unittest.TestCase):
    def test_rejects_misshapen_or_unknown_tensors_and_bad_tokens(self):
        cfg = LlamaConfig.from_hf(CONFIG)
        t = {k: torch.from_numpy(v) for k, v in tiny_tensors(0).items()}
        bad = dict(t, **{"model.norm.weight": torch.ones(3)})
        with self.assertRaisesRegex(ValueError, r"model.norm.weight has shape \[3\]"):
            TorchLlama(cfg, bad)
        with self.assertRaisesRegex(ValueError, "no place in the llama architecture"):
            TorchLlama(cfg, dict(t, **{"model.layers.0.extra.weight": torch.ones(2)}))
        # Biases of projections (qwen2's q/k/v) are accepted and used.
        biased = TorchLlama(cfg, dict(t, **{"model.layers.0.self_attn.q_proj.bias": torch.ones(16)}))
        self.assertIn("model.layers.0.self_attn.q_proj.bias", biased.params)
        with self.assertRaisesRegex(ValueError, "token 12 at 1 is outside the vocabulary"):
            TorchLlama(cfg, t).hidden([1, 12], [0, 1], np.tri(2, dtype=bool))
        with self.assertRaisesRegex(ValueError, "rope_scaling"):
            LlamaConfig.from_hf(dict(CONFIG, rope_scaling={"type": "linear", "factor": 2}))


if __name__ == "__main__":
    unittest.main()
