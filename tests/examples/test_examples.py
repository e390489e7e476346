"""Every example runs on every runtime and matches its NumPy reference (the examples assert)."""
import importlib
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

NAMES = ["vector_add", "gelu", "softmax", "matmul", "histogram", "prefix_sum"]


@pytest.mark.parametrize("name", NAMES)
def test_example(rt, name):
    importlib.import_module(name).run(rt)


def test_vector_add_lines(rt):
    importlib.import_module("vector_add").run(rt, n=4096 * 4, line=4)


@pytest.mark.parametrize("block", [32, 256])
def test_softmax_block_sizes(rt, block):
    importlib.import_module("softmax").run(rt, rows=5, cols=777, block=block)


def test_prefix_sum_partial_cube(rt):
    importlib.import_module("prefix_sum").run(rt, n=1000, block=100)
