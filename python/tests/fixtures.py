"""Fixture batches for the tests: real batches written by the TypeScript batch builder (src/testing/python-fixtures.ts).

``ARBOR_FIXTURE_DIR`` names a directory already holding them (src/batch/python-client.test.ts sets it);
otherwise they are written once per run into a temporary directory with ``npx tsx scripts/python-fixtures.ts``
from the repository root. Without node the tests that need them are skipped, saying why.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import unittest
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Fixture names (src/testing/python-fixtures.ts PYTHON_FIXTURES).
NAMES = ["grpo", "chunked-mdp", "gspo-per-call"]
#: Bound on writing the fixtures (tsx compiles the batch builder on first use).
GENERATE_TIMEOUT_S = 180

_dir: Optional[str] = None
_error: Optional[str] = None


def fixture_dir() -> str:
    """The directory holding ``<name>.safetensors``, ``<name>.arrow`` and ``<name>.expected.json``; skips the test when none can be made."""
    global _dir, _error
    if _dir is None and _error is None:
        given = os.environ.get("ARBOR_FIXTURE_DIR")
        if given:
            _dir = given
        else:
            tmp = tempfile.mkdtemp(prefix="arbor-pyfx-")
            atexit.register(shutil.rmtree, tmp, ignore_errors=True)
            tsx = os.path.join(ROOT, "node_modules", ".bin", "tsx")
            if not os.path.exists(tsx):
                _error = f"no fixtures: set ARBOR_FIXTURE_DIR, or install node_modules so that {tsx} can write them"
            else:
                try:
                    subprocess.run([tsx, "scripts/python-fixtures.ts", tmp], cwd=ROOT, check=True, capture_output=True, timeout=GENERATE_TIMEOUT_S)
                    _dir = tmp
                except (subprocess.SubprocessError, OSError) as e:
                    detail = getattr(e, "stderr", b"") or b""
                    _error = f"no fixtures: writing them with {tsx} failed: {e} {detail.decode(errors='replace')[-2000:]}"
    if _error is not None:
        raise unittest.SkipTest(_error)
    assert _dir is not None
    return _dir


def read_bytes(name: str, ext: str) -> bytes:
    """The bytes of fixture ``name`` in format ``ext`` (``safetensors`` or ``arrow``)."""
    with open(os.path.join(fixture_dir(), f"{name}.{ext}"), "rb") as f:
        return f.read()


def expected(name: str) -> Dict[str, Any]:
    """The JSON the TypeScript side wrote beside fixture ``name``: ``batchId``, ``loss``, ``programs``, ``samples``."""
    with open(os.path.join(fixture_dir(), f"{name}.expected.json")) as f:
        return json.load(f)


def expected_samples(name: str) -> List[Dict[str, Any]]:
    """Every sample of fixture ``name``: ids plus ``tokens``, ``lossMask``, ``advantage``, ``oldLogprob``, ``weight``, ``unit``."""
    return expected(name)["samples"]


def has_pyarrow() -> bool:
    """Whether pyarrow can be imported (Arrow batches)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True
