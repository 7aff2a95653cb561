"""hf_checkpoint: a saved checkpoint reads back bit-exactly with its config and copied tokenizer files; sharded
and half-precision weights are read; unsupported checkpoints are refused naming the file."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import unittest

import numpy as np

from arbor_client.safetensors import load_safetensors, save_safetensors

try:
    import torch

    from arbor_client.hf_checkpoint import load_hf_checkpoint, save_hf_checkpoint
except ImportError:
    torch = None

from .torch_fixtures import CONFIG, tiny_tensors, write_tiny_checkpoint

def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def read_json(path):
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


SKIP = "torch is not installed (run with /usr/bin/python3 or $ARBOR_PYTHON)"


@unittest.skipIf(torch is None, SKIP)
class HfCheckpointTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="arbor-hf-ckpt-")
        self.src = write_tiny_checkpoint(os.path.join(self.dir, "src"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_save_then_load_is_exact_and_keeps_config_and_tokenizer(self):
        ckpt = load_hf_checkpoint(self.src)
        self.assertEqual(ckpt.config, read_json(os.path.join(self.src, "config.json")))
        out = save_hf_checkpoint(os.path.join(self.dir, "out"), ckpt.config, ckpt.tensors, source_dir=self.src)
        self.assertEqual(sorted(os.listdir(out)), ["config.json", "model.safetensors", "tokenizer.json"])
        with open(os.path.join(out, "tokenizer.json"), "rb") as a, open(os.path.join(self.src, "tokenizer.json"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        tensors, meta = load_safetensors(os.path.join(out, "model.safetensors"))
        self.assertEqual(meta, {"format": "pt"})
        self.assertTrue(all(t.dtype == np.float32 for t in tensors.values()))
        back = load_hf_checkpoint(out, torch.float64)
        self.assertEqual(back.config, ckpt.config)
        for name, t in ckpt.tensors.items():
            self.assertEqual(back.tensors[name].dtype, torch.float64)
            self.assertTrue(torch.equal(back.tensors[name].float(), t), name)

    def test_reads_shards_and_half_precision(self):
        sharded = os.path.join(self.dir, "sharded")
        os.makedirs(sharded)
        tensors = tiny_tensors(0)
        names = sorted(tensors)
        half = {n: tensors[n].astype(np.float16) for n in names[: len(names) // 2]}
        rest = {n: tensors[n] for n in names[len(names) // 2 :]}
        save_safetensors(os.path.join(sharded, "model-00001-of-00002.safetensors"), half)
        save_safetensors(os.path.join(sharded, "model-00002-of-00002.safetensors"), rest)
        index = {"weight_map": {**{n: "model-00001-of-00002.safetensors" for n in half}, **{n: "model-00002-of-00002.safetensors" for n in rest}}}
        write_json(os.path.join(sharded, "model.safetensors.index.json"), index)
        write_json(os.path.join(sharded, "config.json"), CONFIG)
        ckpt = load_hf_checkpoint(sharded)
        self.assertEqual(sorted(ckpt.tensors), names)
        for n in names:
            want = tensors[n].astype(np.float16).astype(np.float32) if n in half else tensors[n]
            np.testing.assert_array_equal(ckpt.tensors[n].numpy(), want, err_msg=n)

    def test_refuses_unsupported_checkpoints_naming_the_file(self):
        write_json(os.path.join(self.src, "config.json"), dict(CONFIG, model_type="gpt2"))
        with self.assertRaisesRegex(ValueError, r"config.json: model_type 'gpt2' is not supported"):
            load_hf_checkpoint(self.src)
        with self.assertRaisesRegex(NotADirectoryError, "not a directory"):
            load_hf_checkpoint(os.path.join(self.dir, "nope"))
        empty = os.path.join(self.dir, "empty")
        os.makedirs(empty)
        write_json(os.path.join(empty, "config.json"), CONFIG)
        with self.assertRaisesRegex(FileNotFoundError, "no model.safetensors"):
            load_hf_checkpoint(empty)


if __name__ == "__main__":
    unittest.main()
