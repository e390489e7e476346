"""The porting check: examples/char_gpt.py is PyTorch code with only its imports changed.

Its source is loaded twice: as it is (dl) and with the four import lines swapped for
PyTorch's. The same GPT is built in both from the same weights (torch's state_dict copied
into dl's model), fed the same batches through each library's DataLoader, and trained by the
same `train()` (AdamW, cosine schedule, clip_grad_norm_): the first steps' losses agree."""
from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

PATH = Path(__file__).resolve().parents[2] / "examples" / "char_gpt.py"
SWAPS = {
    "import dl as torch": "import torch",
    "from dl import nn": "from torch import nn",
    "from dl.nn import functional as F": "from torch.nn import functional as F",
    "from dl.utils.data import DataLoader, Dataset":
        "from torch.utils.data import DataLoader, Dataset",
}


def _load(name: str, src: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = str(PATH)
    sys.modules[name] = mod  # dataclasses and pickling look modules up by name
    exec(compile(src, str(PATH), "exec"), mod.__dict__)
    return mod


def _torch_source() -> str:
    """The example with each dl import line replaced by PyTorch's (and nothing else)."""
    lines = PATH.read_text(encoding="utf-8").splitlines(keepends=True)
    seen = set()
    for i, line in enumerate(lines):
        code = line.split("#")[0].strip()
        if code in SWAPS:
            lines[i] = SWAPS[code] + "\n"
            seen.add(code)
    assert seen == set(SWAPS), f"import lines not found: {set(SWAPS) - seen}"
    src = "".join(lines)
    # nothing else names dl: no import of it, no `dl.` in the code
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            assert all(a.name.split(".")[0] != "dl" for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] != "dl"
        elif isinstance(node, ast.Name):
            assert node.id != "dl"
    return src


@pytest.fixture(scope="module")
def mods():
    dmod = _load("char_gpt_dl", PATH.read_text(encoding="utf-8"))
    tmod = _load("char_gpt_torch", _torch_source())
    assert dmod.torch.__name__ == "dl" and tmod.torch.__name__ == "torch"
    yield dmod, tmod
    sys.modules.pop("char_gpt_dl", None)
    sys.modules.pop("char_gpt_torch", None)


def test_losses_match_torch(mods, monkeypatch):
    monkeypatch.setenv("CUBE_AUTOTUNE", "off")
    dmod, tmod = mods
    import dl
    text = dmod.TEXT.read_text(encoding="utf-8")
    chars = sorted(set(text))
    block, batch, steps = 16, 8, 5
    cfg = dict(vocab_size=len(chars), block_size=block, n_layer=2, n_head=4, n_embd=32)

    torch.manual_seed(0)
    tmodel = tmod.GPT(**cfg)
    dmodel = dmod.GPT(**cfg).to("cpu")
    state = {k: v.detach().numpy() for k, v in tmodel.state_dict().items()}
    assert set(state) == set(dmodel.state_dict())  # same names, the mask buffers included
    dmodel.load_state_dict(state)

    # the same batches: a fixed random order given to both loaders as their sampler
    order = np.random.default_rng(0).permutation(len(text) - block)[:batch * steps].tolist()
    tds, dds = tmod.CharDataset(text, block, chars), dmod.CharDataset(text, block, chars)
    tloader = tmod.DataLoader(tds, batch_size=batch, sampler=order, drop_last=True)
    dloader = dmod.DataLoader(dds, batch_size=batch, sampler=order, drop_last=True)
    xt, yt = next(iter(tloader))
    xd, yd = next(iter(dloader))
    assert isinstance(xd, dl.Tensor) and xd.dtype is dl.int64 and xd.shape == (batch, block)
    np.testing.assert_array_equal(xd.numpy(), xt.numpy())
    np.testing.assert_array_equal(yd.numpy(), yt.numpy())

    # the forward pass alone first: logits and loss
    with torch.no_grad():
        tlogits, tloss = tmodel(xt, yt)
    with dl.no_grad():
        dlogits, dloss = dmodel(xd, yd)
    np.testing.assert_allclose(dlogits.numpy(), tlogits.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dloss.item(), tloss.item(), rtol=1e-5)

    tlosses = tmod.train(tmodel, tloader, steps, lr=3e-3, device="cpu")
    dlosses = dmod.train(dmodel, dloader, steps, lr=3e-3, device="cpu")
    print("torch", tlosses)
    print("dl   ", dlosses)
    assert len(dlosses) == len(tlosses) == steps
    np.testing.assert_allclose(dlosses, tlosses, rtol=1e-4)
    assert dlosses[-1] < dlosses[0]  # it learns
    tparams = dict(tmodel.named_parameters())
    for name, p in dmodel.named_parameters():
        np.testing.assert_allclose(p.numpy(), tparams[name].detach().numpy(), rtol=1e-3,
                                   atol=1e-4, err_msg=name)

    # generation (the training batch's shapes: few new kernels); at a temperature near 0
    # the inverse-CDF sampler picks the argmax token, so the two libraries agree
    tmodel.eval()
    dmodel.eval()
    tout = tmodel.generate(xt, 2, temperature=1e-4)
    dout = dmodel.generate(xd, 2, temperature=1e-4)
    assert dout.shape == (batch, block + 2) and dout.dtype is dl.int64
    np.testing.assert_array_equal(dout.numpy(), tout.numpy())
    # at temperature 1 the samples are valid token ids drawn from the generator's numbers
    out = dmodel.generate(xd, 1, generator=dl.Generator().manual_seed(0)).numpy()
    again = dmodel.generate(xd, 1, generator=dl.Generator().manual_seed(0)).numpy()
    np.testing.assert_array_equal(out, again)
    assert out[:, -1].min() >= 0 and out[:, -1].max() < len(chars)


def test_main_runs(mods, monkeypatch, capsys):
    """The program's own entry point (shuffling DataLoader, training, validation; no
    sampling: a batch of one compiles many new kernels, and the sampler is checked above)."""
    monkeypatch.setenv("CUBE_AUTOTUNE", "off")
    dmod, _ = mods
    losses = dmod.main(["--steps", "3", "--batch-size", "8", "--block-size", "16",
                        "--n-embd", "32", "--sample-len", "0"])
    out = capsys.readouterr().out
    assert len(losses) == 3 and all(np.isfinite(losses))
    assert "validation loss" in out and "--- sample ---" in out
