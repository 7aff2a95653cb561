"""Adapters: every sample rebuilt from verl's, TRL's and slime's tensors equals the batch's (ids, mask, logprobs, advantages)."""
from __future__ import annotations

import unittest

import numpy as np

from arbor_client.adapters import split_samples, to_slime, to_trl, to_verl
from arbor_client.batch import Batch

from .fixtures import NAMES, expected_samples, read_bytes

PAD = 7  # a pad id that is also a real token id of the fixtures' vocabulary would hide a padding bug: 7 is not one


def batches():
    for name in NAMES:
        yield name, Batch.from_safetensors(read_bytes(name, "safetensors"))


class AdapterTest(unittest.TestCase):
    def assert_sample(self, name: str, i: int, tokens, mask, logprob, advantage) -> None:
        """Sample ``i`` of fixture ``name`` as the TypeScript side wrote it (masks on every token, floats float32)."""
        exp = expected_samples(name)[i]
        with self.subTest(fixture=name, sample=exp["id"]):
            self.assertEqual(list(map(int, tokens)), exp["tokens"])
            self.assertEqual(list(map(int, mask)), exp["lossMask"])
            np.testing.assert_array_equal(np.asarray(logprob, dtype=np.float32), np.array(exp["oldLogprob"], dtype=np.float32))
            np.testing.assert_array_equal(np.asarray(advantage, dtype=np.float32), np.array(exp["advantage"], dtype=np.float32))

    def test_prompt_is_everything_before_the_first_model_token(self) -> None:
        for name, batch in batches():
            for cut, exp in zip(split_samples(batch), expected_samples(name)):
                self.assertEqual(exp["lossMask"][:cut], [0] * cut)
                self.assertEqual(exp["lossMask"][cut], 1)

    def test_verl_rebuilds_every_sample(self) -> None:
        for name, batch in batches():
            d = to_verl(batch, pad_token_id=PAD)
            B, P = d["prompts"].shape
            R = d["responses"].shape[1]
            self.assertEqual(B, batch.num_samples)
            for key, shape in (("input_ids", (B, P + R)), ("attention_mask", (B, P + R)), ("position_ids", (B, P + R)), ("response_mask", (B, R)), ("old_log_probs", (B, R)), ("rollout_log_probs", (B, R)), ("advantages", (B, R))):
                self.assertEqual(d[key].shape, shape, key)
            self.assertEqual(d["input_ids"].dtype, np.int64)
            self.assertEqual(d["advantages"].dtype, np.float32)
            np.testing.assert_array_equal(d["input_ids"], np.concatenate([d["prompts"], d["responses"]], axis=1))
            for i in range(B):
                attn = d["attention_mask"][i].astype(bool)
                p_real = attn[:P].sum()
                r_real = attn[P:].sum()
                # Left-padded prompt, right-padded response: the real tokens are one contiguous run.
                self.assertTrue(np.all(attn[P - p_real : P + r_real]))
                self.assertTrue(np.all(d["input_ids"][i][~attn] == PAD))
                # verl's compute_position_id_with_mask: 0 on left padding, then 0..n-1, the last repeated on right padding.
                n = int(attn.sum())
                np.testing.assert_array_equal(d["position_ids"][i][attn], np.arange(n))
                self.assertTrue(np.all(d["position_ids"][i][: P - p_real] == 0))
                self.assertTrue(np.all(d["position_ids"][i][P + r_real :] == n - 1))
                self.assertTrue(np.all(d["response_mask"][i][r_real:] == 0))
                tokens = d["input_ids"][i][attn]
                mask = np.concatenate([np.zeros(p_real, dtype=np.int64), d["response_mask"][i][:r_real]])
                logprob = np.concatenate([np.zeros(p_real, dtype=np.float32), d["old_log_probs"][i][:r_real]])
                advantage = np.concatenate([np.zeros(p_real, dtype=np.float32), d["advantages"][i][:r_real]])
                self.assert_sample(name, i, tokens, mask, logprob, advantage)
                np.testing.assert_array_equal(d["rollout_log_probs"][i], d["old_log_probs"][i])
            self.assertEqual(list(d["uid"]), [s["groupId"] for s in batch.samples])

    def test_verl_multi_turn_response_keeps_tool_output_masked(self) -> None:
        batch = Batch.from_safetensors(read_bytes("grpo", "safetensors"))
        d = to_verl(batch)
        # Sample 0: prompt 11 12 13 | 20 21 22 (model) 90 91 (tool) 23 24 (model) 92 (tool) 25 (model).
        self.assertEqual(d["responses"][0][:9].tolist(), [20, 21, 22, 90, 91, 23, 24, 92, 25])
        self.assertEqual(d["response_mask"][0][:9].tolist(), [1, 1, 1, 0, 0, 1, 1, 0, 1])

    def test_verl_fixed_shapes(self) -> None:
        batch = Batch.from_safetensors(read_bytes("grpo", "safetensors"))
        d = to_verl(batch, prompt_length=8, response_length=16)
        self.assertEqual(d["input_ids"].shape, (batch.num_samples, 24))
        with self.assertRaisesRegex(ValueError, r"prompt_length: 2 is shorter than the longest one in the batch \(3 tokens\)"):
            to_verl(batch, prompt_length=2)
        with self.assertRaisesRegex(ValueError, r"response_length: 4 is shorter"):
            to_verl(batch, response_length=4)

    def test_trl_rebuilds_every_sample(self) -> None:
        for name, batch in batches():
            d = to_trl(batch, pad_token_id=PAD)
            B, P = d["prompt_ids"].shape
            C = d["completion_ids"].shape[1]
            for key in ("completion_mask", "tool_mask", "old_per_token_logps", "sampling_per_token_logps", "advantages"):
                self.assertEqual(d[key].shape, (B, C), key)
            for i in range(B):
                pm = d["prompt_mask"][i].astype(bool)
                cm = d["completion_mask"][i].astype(bool)
                p_real, c_real = int(pm.sum()), int(cm.sum())
                self.assertTrue(np.all(pm[P - p_real :]) and np.all(cm[:c_real]))
                self.assertTrue(np.all(d["tool_mask"][i][c_real:] == 1))  # TRL pads tool_mask with 1
                tokens = np.concatenate([d["prompt_ids"][i][pm], d["completion_ids"][i][cm]])
                loss = (d["completion_mask"][i] * d["tool_mask"][i])[:c_real]
                mask = np.concatenate([np.zeros(p_real, dtype=np.int64), loss])
                logprob = np.concatenate([np.zeros(p_real, dtype=np.float32), d["old_per_token_logps"][i][:c_real]])
                advantage = np.concatenate([np.zeros(p_real, dtype=np.float32), d["advantages"][i][:c_real]])
                self.assert_sample(name, i, tokens, mask, logprob, advantage)
            self.assertEqual(int(d["num_items_in_batch"]), sum(sum(s["lossMask"]) for s in expected_samples(name)))

    def test_slime_rebuilds_every_sample(self) -> None:
        for name, batch in batches():
            d = to_slime(batch)
            self.assertEqual(d["sample_indices"], list(range(batch.num_samples)))
            for i in range(batch.num_samples):
                tokens = d["tokens"][i]
                r = d["response_lengths"][i]
                p = len(tokens) - r
                for key in ("loss_masks", "rollout_log_probs", "advantages"):
                    self.assertEqual(len(d[key][i]), r, key)
                mask = [0] * p + d["loss_masks"][i]
                logprob = [0.0] * p + d["rollout_log_probs"][i]
                advantage = np.concatenate([np.zeros(p, dtype=np.float32), d["advantages"][i]])
                self.assert_sample(name, i, tokens, mask, logprob, advantage)
            # Segments of one program share a rollout id; programs are numbered densely in order of appearance.
            programs = [s["programId"] for s in batch.samples]
            first = {}
            want = [first.setdefault(p, len(first)) for p in programs]
            self.assertEqual(d["rollout_ids"], want)
            reward = {p["programId"]: p["reward"] for p in batch.programs}
            self.assertEqual(d["rewards"], [reward[p] for p in programs])

    def test_a_sample_without_model_tokens_is_all_prompt(self) -> None:
        # Hand-made tree: sample 0 = [1, 2, 3] (no model token), sample 1 = [1, 2, 4, 5] (4 and 5 generated).
        batch = Batch(
            batch_id="b", loss={}, tokens=[1, 2, 3, 4, 5], parents=[-1, 0, 1, 1, 3], positions=[0, 1, 2, 2, 3],
            term_node=[1, 3], term_target=[4, 5], term_sample=[1, 1], term_unit=[0, 1], term_token=[2, 3],
            term_advantage=[0.5, 0.5], term_old_logprob=[-1.0, -2.0], term_weight=[0.25, 0.25],
            sample_offsets=[0, 3, 7], sample_paths=[0, 1, 2, 0, 1, 3, 4], samples=[{"id": "a", "programId": "p"}, {"id": "b", "programId": "q"}],
        )
        self.assertEqual(split_samples(batch), [3, 2])
        v = to_verl(batch, pad_token_id=PAD)
        self.assertEqual(v["prompts"].tolist(), [[1, 2, 3], [PAD, 1, 2]])
        self.assertEqual(v["responses"].tolist(), [[PAD, PAD], [4, 5]])
        self.assertEqual(v["attention_mask"].tolist(), [[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]])
        self.assertEqual(v["position_ids"].tolist(), [[0, 1, 2, 2, 2], [0, 0, 1, 2, 3]])
        self.assertEqual(v["response_mask"].tolist(), [[0, 0], [1, 1]])
        self.assertEqual(v["old_log_probs"].tolist(), [[0.0, 0.0], [-1.0, -2.0]])
        s = to_slime(batch)
        self.assertEqual((s["response_lengths"], s["loss_masks"], s["rollout_ids"]), ([0, 2], [[], [1, 1]], [0, 1]))
        self.assertNotIn("rewards", s)  # no programs metadata: no rewards to give
        t = to_trl(batch, pad_token_id=PAD)
        self.assertEqual(t["completion_mask"].tolist(), [[0, 0], [1, 1]])
        self.assertEqual(int(t["num_items_in_batch"]), 2)

    def test_per_call_samples_share_a_rollout_id(self) -> None:
        batch = Batch.from_safetensors(read_bytes("gspo-per-call", "safetensors"))
        d = to_slime(batch)
        # Per-call mode: one sample per call, so programs with several calls repeat their rollout id.
        self.assertLess(len(set(d["rollout_ids"])), batch.num_samples)


if __name__ == "__main__":
    unittest.main()
