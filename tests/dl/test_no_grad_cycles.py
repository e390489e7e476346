"""A forward under grad mode without a backward frees its outputs when they go, as torch's
does: no gradient closure holds its own op's output (`saved_output`), so nothing waits for
a gc pass. A cycle kept every output's memory out of the buffer pool until gc ran, and the
next forward wrote to fresh pages (a 4 MB ReLU took 550 us against 149 us).

Every differentiable entry of the op table (its first sample, on the interpreter) and the
common modules are checked with the garbage collector off."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import test_op_table as table

import dl
from dl import nn
from dl.nn import functional as F

ENTRIES = [o for o in table.OPS if o.grad and dl.float32 in o.dtypes]


@pytest.fixture
def no_gc():
    # no full collection first: the outputs checked are new, so no earlier garbage can
    # hold them, and in the whole suite's process (a heap of millions of objects) each
    # gc.collect() took ~4 s: this file's 330 tests took 20 minutes of CI
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _args(info):
    s = info.samples()[0]
    args = [table._convert(a, dl.float32, "interp", False, "dl") for a in s.args]
    kw = {k: table._convert(v, dl.float32, "interp", False, "dl") for k, v in s.kwargs.items()}
    grad = [i for i, a in enumerate(s.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
            and (s.grad is None or i in s.grad)]
    for i in grad:
        args[i] = args[i].detach().requires_grad_(True)
    return args, kw, bool(grad)


def _outputs_freed(out, inputs) -> list[bool]:
    refs = [weakref.ref(o) for o in table._flat(out) if isinstance(o, dl.Tensor)
            and o.requires_grad and not any(o is a for a in inputs)]
    del out
    return [r() is None for r in refs]


@pytest.mark.parametrize("info", ENTRIES, ids=lambda o: o.name)
def test_op_output_freed_without_gc(info, no_gc):
    args, kw, grad = _args(info)
    if not grad:
        pytest.skip("the first sample takes no gradient")
    freed = _outputs_freed(info.op(*args, **kw), args)
    assert all(freed), f"{info.name}: an output is kept alive by its own gradient closure"


def _x(*shape):
    return dl.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))


MODULES = {
    "linear": lambda: (nn.Linear(8, 4), _x(3, 8)),
    "conv_bn_relu_pool": lambda: (nn.Sequential(nn.Conv2d(4, 6, 3, padding=1),
                                                nn.BatchNorm2d(6), nn.ReLU(),
                                                nn.MaxPool2d(2)), _x(2, 4, 6, 6)),
    "mlp_softmax": lambda: (nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 2),
                                          nn.Softmax(-1)), _x(3, 8)),
    "transformer_layer": lambda: (nn.TransformerEncoderLayer(
        16, 2, dim_feedforward=32, dropout=0.0, batch_first=True), _x(2, 5, 16)),
}


@pytest.mark.parametrize("name", MODULES)
def test_module_output_freed_without_gc(dev, name, no_gc):
    m, x = MODULES[name]()
    m = m.to(dev)
    freed = _outputs_freed(m(x.to(dev)), [])
    assert freed and all(freed), f"{name}: the output is kept alive by its own graph"


def test_loss_freed_without_gc(no_gc):
    x = _x(4, 5).requires_grad_()
    freed = _outputs_freed(F.cross_entropy(x, dl.tensor(np.array([0, 1, 2, 3]))), [x])
    assert freed and all(freed)
