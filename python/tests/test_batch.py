"""Batch: both wire formats of real batches read back to every sample exactly, and malformed files are refused by name."""
from __future__ import annotations

import json
import sys
import unittest
from unittest import mock

import numpy as np

from arbor_client.batch import Batch, BatchFormatError
from arbor_client.safetensors import read_safetensors, write_safetensors

from .fixtures import NAMES, expected, expected_samples, has_pyarrow, read_bytes


def assert_flat_matches(test: unittest.TestCase, batch: Batch, name: str) -> None:
    """Every sample of ``batch`` equals what the TypeScript side wrote, bit for bit (floats as float32)."""
    want = expected_samples(name)
    flat = batch.flat()
    test.assertEqual(len(flat), len(want))
    for i, (got, exp) in enumerate(zip(flat, want)):
        with test.subTest(fixture=name, sample=exp["id"]):
            test.assertEqual(got.tokens.tolist(), exp["tokens"])
            test.assertEqual(batch.sample_tokens(i).tolist(), exp["tokens"])
            test.assertEqual(got.loss_mask.tolist(), exp["lossMask"])
            test.assertEqual(got.unit.tolist(), exp["unit"])
            for field, key in (("advantage", "advantage"), ("old_logprob", "oldLogprob"), ("weight", "weight")):
                np.testing.assert_array_equal(getattr(got, field), np.array(exp[key], dtype=np.float32), err_msg=field)
                test.assertEqual(getattr(got, field).dtype, np.float32)
            test.assertEqual(batch.samples[i]["id"], exp["id"])
            test.assertEqual(batch.samples[i]["groupId"], exp["groupId"])
            test.assertEqual(batch.samples[i]["callIds"], exp["callIds"])


class SafetensorsBatchTest(unittest.TestCase):
    def test_reconstructs_every_sample_of_every_fixture(self) -> None:
        for name in NAMES:
            batch = Batch.from_safetensors(read_bytes(name, "safetensors"))
            exp = expected(name)
            self.assertEqual(batch.batch_id, exp["batchId"])
            self.assertEqual(batch.loss, exp["loss"])
            self.assertEqual(batch.programs, exp["programs"])
            assert_flat_matches(self, batch, name)

    def test_the_tree_shares_prefixes(self) -> None:
        batch = Batch.from_safetensors(read_bytes("grpo", "safetensors"))
        # Siblings fork inside their first answer and groups share a prompt token: fewer nodes than tokens.
        self.assertLess(len(batch.tokens), len(batch.sample_paths))
        self.assertEqual(batch.tree_stats["treeTokens"], len(batch.tokens))
        self.assertEqual(batch.tree_stats["flatTokens"], len(batch.sample_paths))
        self.assertEqual(batch.parents[0], -1)
        # Positions are depths: a child is one deeper than its parent.
        kids = batch.parents >= 0
        np.testing.assert_array_equal(batch.positions[kids], batch.positions[batch.parents[kids]] + 1)

    def _rewrite(self, change) -> bytes:
        tensors, meta = read_safetensors(read_bytes("grpo", "safetensors"))
        change(tensors, meta)
        return write_safetensors(tensors, meta)

    def test_refuses_other_schemas_missing_tensors_and_wrong_dtypes(self) -> None:
        with self.assertRaisesRegex(BatchFormatError, r"schema is 'arbor.tree.v1', this reader understands 'arbor.tree.v2'"):
            Batch.from_safetensors(self._rewrite(lambda t, m: m.update({"arbor.schema": "arbor.tree.v1"})))
        with self.assertRaisesRegex(BatchFormatError, r"missing tensor 'term_unit'"):
            Batch.from_safetensors(self._rewrite(lambda t, m: t.pop("term_unit")))
        with self.assertRaisesRegex(BatchFormatError, r"tensor 'parents' is float32\[\d+\], arbor.tree.v2 stores it as 1-D int32"):
            Batch.from_safetensors(self._rewrite(lambda t, m: t.update(parents=t["parents"].astype(np.float32))))
        with self.assertRaisesRegex(BatchFormatError, r"missing metadata 'arbor.loss'"):
            Batch.from_safetensors(self._rewrite(lambda t, m: m.pop("arbor.loss")))
        with self.assertRaisesRegex(BatchFormatError, r"safetensors batch: safetensors: 3 bytes is too short"):
            Batch.from_safetensors(b"abc")

    def test_refuses_inconsistent_trees(self) -> None:
        def bump(name: str, j: int, by: int):
            def change(t, m):
                t[name][j] += by
            return change

        with self.assertRaisesRegex(BatchFormatError, r"term_target differs from the sample's token at term_token"):
            Batch.from_safetensors(self._rewrite(bump("term_target", 0, 1)))
        with self.assertRaisesRegex(BatchFormatError, r"term_node is not the node of the token before the target"):
            Batch.from_safetensors(self._rewrite(bump("term_node", 3, 1)))
        with self.assertRaisesRegex(BatchFormatError, r"sample_paths holds an index outside"):
            Batch.from_safetensors(self._rewrite(lambda t, m: t.update(sample_paths=t["sample_paths"] + 1000)))
        with self.assertRaisesRegex(BatchFormatError, r"samples metadata lists 4 samples, sample_offsets 5"):
            Batch.from_safetensors(self._rewrite(lambda t, m: m.update({"arbor.samples": json.dumps(json.loads(m["arbor.samples"])[:4])})))
        with self.assertRaisesRegex(BatchFormatError, r"term_weight has \d+ entries for \d+ terms"):
            Batch.from_safetensors(self._rewrite(lambda t, m: t.update(term_weight=t["term_weight"][:-1])))

    def test_sample_index_out_of_range(self) -> None:
        batch = Batch.from_safetensors(read_bytes("grpo", "safetensors"))
        with self.assertRaisesRegex(IndexError, r"sample 5: the batch has 5 samples"):
            batch.sample_tokens(5)


class ArrowBatchTest(unittest.TestCase):
    @unittest.skipUnless(has_pyarrow(), "pyarrow is not installed: Batch.from_arrow cannot be exercised")
    def test_arrow_gives_the_same_batch_as_safetensors(self) -> None:
        for name in NAMES:
            with self.subTest(fixture=name):
                arrow = Batch.from_arrow(read_bytes(name, "arrow"))
                tree = Batch.from_safetensors(read_bytes(name, "safetensors"))
                self.assertTrue(arrow.equals(tree))
                assert_flat_matches(self, arrow, name)

    @unittest.skipUnless(has_pyarrow(), "pyarrow is not installed: Batch.from_arrow cannot be exercised")
    def test_arrow_refuses_non_arrow_bytes(self) -> None:
        with self.assertRaisesRegex(BatchFormatError, r"arrow batch: not an Arrow IPC file"):
            Batch.from_arrow(read_bytes("grpo", "safetensors"))

    def test_without_pyarrow_the_error_says_what_to_do(self) -> None:
        with mock.patch.dict(sys.modules, {"pyarrow": None, "pyarrow.ipc": None}):
            with self.assertRaisesRegex(ImportError, r"Batch.from_arrow needs pyarrow .*format='safetensors'"):
                Batch.from_arrow(b"")


if __name__ == "__main__":
    unittest.main()
