"""The layers beyond the core (dl/nn/layers_extra.py, recurrent.py, decoder.py, containers)
against torch.nn with copied weights: state_dict keys, forward, input and every parameter's
gradient; initialisation; train/eval behaviour and dropout statistics. Interp by default,
one test per layer family on every runtime (`dev`)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import dl
from dl import nn
from dl.nn import functional as F


def _copy(ours: nn.Module, ref: torch.nn.Module, device=None) -> None:
    assert list(ours.state_dict()) == list(ref.state_dict()), \
        (list(ours.state_dict()), list(ref.state_dict()))
    ours.load_state_dict({k: dl.tensor(v.detach().numpy(), device=device)
                          for k, v in ref.state_dict().items()})


def _flat(y):
    return [t for e in y for t in _flat(e)] if isinstance(y, (tuple, list)) else [y]


def _compare(ours, ref, *inputs, rtol=1e-4, atol=1e-5, kwargs=None, out=lambda y: y,
             device=None):
    """Copies ref's weights into ours, then compares the outputs (`out` picks a tensor or
    a tuple of tensors of the module's result), the float inputs' gradients and every
    parameter's gradient, for a loss weighting every picked output."""
    if device is not None:
        ours.to(device)
    _copy(ours, ref, device)
    ours.zero_grad()
    ref.zero_grad()
    kwargs = kwargs or {}
    xs = [dl.tensor(a, requires_grad=a.dtype.kind == "f", device=device) for a in inputs]
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    ys, tys = _flat(out(ours(*xs, **kwargs))), _flat(out(ref(*ts, **kwargs)))
    assert len(ys) == len(tys)
    loss = tloss = 0
    for k, (y, ty) in enumerate(zip(ys, tys)):
        close(y, ty, rtol=rtol, atol=atol)
        w = rand_np(tuple(ty.shape), 7 + k)
        loss = (y * dl.tensor(w, device=device)).sum() + loss
        tloss = (ty * torch.tensor(w)).sum() + tloss
    loss.backward()
    tloss.backward()
    for x, t in zip(xs, ts):
        if t.grad is not None:
            close(x.grad, t.grad, rtol=rtol, atol=atol)
    params = dict(ours.named_parameters())
    assert set(params) == {n for n, _ in ref.named_parameters()}
    for name, p in ref.named_parameters():
        assert params[name].grad is not None, f"{name}: no gradient"
        close(params[name].grad, p.grad, rtol=rtol, atol=atol)


def _pair(name, *args, **kwargs):
    """(ours, torch's) of the same module, torch's seeded."""
    torch.manual_seed(0)
    return getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


# ---- convolutions ------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(stride=2, padding=1), dict(padding="same", dilation=2),
                                dict(groups=2, bias=False), dict(padding="valid"),
                                dict(padding=2, padding_mode="reflect"),
                                dict(padding="same", padding_mode="circular", dilation=3),
                                dict(padding=1, padding_mode="replicate", stride=2)])
def test_conv1d(kw):
    ours, ref = _pair("Conv1d", 4, 6, 3, **kw)
    _compare(ours, ref, rand_np((2, 4, 9), 1))


def test_conv1d_unbatched_and_init():
    ours, ref = _pair("Conv1d", 3, 5, 4)
    _compare(ours, ref, rand_np((3, 8), 1))
    big = nn.Conv1d(16, 64, 5)
    bound = 1 / np.sqrt(16 * 5)
    w = big.weight.numpy()
    assert w.shape == (64, 16, 5) and np.abs(w).max() <= bound and np.std(w) > bound / 3
    assert np.abs(big.bias.numpy()).max() <= bound


@pytest.mark.parametrize("kw,size", [
    (dict(stride=2, padding=1, output_padding=1), None),
    (dict(stride=(2, 1), groups=2, dilation=(1, 2)), None),
    (dict(stride=3, padding=1), (8, 11)),  # output_size picks the output padding
])
def test_conv_transpose2d(kw, size):
    ours, ref = _pair("ConvTranspose2d", 4, 6, 3, **kw)
    assert tuple(ours.weight.shape) == tuple(ref.weight.shape)
    _compare(ours, ref, rand_np((2, 4, 3, 4), 1),
             kwargs=None if size is None else dict(output_size=size))


def test_conv_transpose1d():
    ours, ref = _pair("ConvTranspose1d", 3, 2, 3, stride=2, padding=1, output_padding=1)
    _compare(ours, ref, rand_np((2, 3, 5), 1))


def test_conv_family_every_runtime(dev):
    # the op table's first conv_transpose2d geometry (its kernels are compiled once)
    ours, ref = _pair("ConvTranspose2d", 3, 2, 3, stride=2, padding=1, output_padding=1)
    _compare(ours, ref, rand_np((2, 3, 4, 5), 1), device=dev)


# ---- normalisation -----------------------------------------------------------------------
def test_group_norm():
    ours, ref = _pair("GroupNorm", 3, 6)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
        ref.bias.uniform_(-1, 1)
    _compare(ours, ref, rand_np((2, 6, 3, 4), 1))
    plain, ref2 = _pair("GroupNorm", 2, 4, eps=1e-3, affine=False)
    _compare(plain, ref2, rand_np((3, 4, 5), 2))


@pytest.mark.parametrize("shape,eps", [((5,), None), ((3, 5), 1e-3)])
def test_rms_norm(shape, eps):
    ours, ref = _pair("RMSNorm", shape, eps=eps)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
    _compare(ours, ref, rand_np((2, 3, 5), 1, low=-1e-3, high=1e-3) if eps is None
             else rand_np((2, 3, 5), 1))


def test_rms_norm_default_eps_is_finfo():
    x = np.full((1, 4), 1e-4, np.float64)
    got = F.rms_norm(dl.tensor(x), (4,))
    want = torch.nn.functional.rms_norm(torch.tensor(x), (4,))
    close(got, want, rtol=1e-12, atol=0)
    plain, ref = _pair("RMSNorm", 4, elementwise_affine=False)
    assert plain.weight is None and not list(plain.parameters())


def test_instance_norm_affine():
    ours, ref = _pair("InstanceNorm2d", 3, affine=True)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
        ref.bias.uniform_(-1, 1)
    _compare(ours, ref, rand_np((2, 3, 4, 5), 1))
    assert ours.running_mean is None and list(ours.state_dict()) == ["weight", "bias"]
    plain, ref1 = _pair("InstanceNorm1d", 3)
    _compare(plain, ref1, rand_np((3, 6), 2))  # unbatched (C, L)


def test_instance_norm_running_stats():
    ours, ref = _pair("InstanceNorm2d", 3, track_running_stats=True, momentum=0.3)
    for seed in (1, 2):
        _compare(ours, ref, rand_np((2, 3, 4, 4), seed))
    close(ours.running_mean, ref.running_mean, atol=1e-6)
    close(ours.running_var, ref.running_var, rtol=1e-5)
    ours.eval()
    ref.eval()
    _compare(ours, ref, rand_np((2, 3, 4, 4), 3))  # the running statistics


def test_norms_every_runtime(dev):
    ours, ref = _pair("GroupNorm", 3, 6)
    _compare(ours, ref, rand_np((2, 6, 3, 4), 1), device=dev)


# ---- resampling, adaptive pooling ---------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(size=(5, 7), mode="bilinear"),
                                dict(scale_factor=1.5, mode="bilinear", align_corners=True),
                                dict(size=(2, 3), mode="nearest-exact")])
def test_upsample(kw):
    _compare(nn.Upsample(**kw), torch.nn.Upsample(**kw), rand_np((2, 3, 4, 5), 1))


def test_upsampling_aliases():
    _compare(nn.UpsamplingBilinear2d(scale_factor=2),
             torch.nn.UpsamplingBilinear2d(scale_factor=2), rand_np((1, 2, 3, 3), 1))
    _compare(nn.UpsamplingNearest2d(size=(5, 4)), torch.nn.UpsamplingNearest2d(size=(5, 4)),
             rand_np((1, 2, 3, 3), 2))


@pytest.mark.parametrize("size", [(3, 2), 1, (5, None), (7, 9)])
def test_adaptive_avg_pool2d(size):
    _compare(nn.AdaptiveAvgPool2d(size), torch.nn.AdaptiveAvgPool2d(size),
             rand_np((2, 3, 5, 7), 1))


def test_adaptive_avg_pool1d():
    _compare(nn.AdaptiveAvgPool1d(3), torch.nn.AdaptiveAvgPool1d(3), rand_np((2, 3, 7), 1))


def test_resampling_every_runtime(dev):
    # the op table's first interpolate and adaptive_avg_pool2d geometries
    _compare(nn.Upsample(scale_factor=(1.7, 0.6), mode="bilinear"),
             torch.nn.Upsample(scale_factor=(1.7, 0.6), mode="bilinear"),
             rand_np((2, 3, 5, 4), 1), device=dev)
    _compare(nn.AdaptiveAvgPool2d((3, 2)), torch.nn.AdaptiveAvgPool2d((3, 2)),
             rand_np((2, 3, 7, 5), 3), device=dev)


# ---- containers, Identity ----------------------------------------------------------------
def test_identity_takes_any_arguments():
    m = nn.Identity(54, unused_argument1=0.1)
    x = dl.tensor(rand_np((2, 3)))
    assert m(x) is x and not list(m.parameters())


def test_module_list_as_torch():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    first, last = ml[0], ml[-1]
    assert ml[2] is last and len(ml) == 3
    sub = ml[1:]
    assert isinstance(sub, nn.ModuleList) and len(sub) == 2 and sub[0] is ml[1]
    ml.insert(0, nn.ReLU())
    assert isinstance(ml[0], nn.ReLU) and ml[1] is first
    del ml[0]
    assert ml[0] is first
    ml += [nn.Tanh()]
    ml.extend([nn.Tanh()])
    assert len(ml) == 5 and ml.pop() is not None and len(ml) == 4
    ml[3] = nn.Linear(2, 1)
    names = [n for n, _ in ml.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias",
                     "3.weight", "3.bias"]
    with pytest.raises(IndexError):
        ml[9]
    ref = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)] +
                              [torch.nn.Linear(2, 1)])
    assert list(ml.state_dict()) == list(ref.state_dict())


def test_module_dict_and_sequential():
    md = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.ReLU()})
    md["c"] = nn.Linear(3, 1)
    assert list(md) == ["a", "b", "c"] and "b" in md and len(md) == 3
    assert list(md.keys()) == ["a", "b", "c"] and md["a"] is list(md.values())[0]
    ref = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 3), "b": torch.nn.ReLU(),
                               "c": torch.nn.Linear(3, 1)})
    assert list(md.state_dict()) == list(ref.state_dict())
    md.update([("d", nn.Tanh())])
    assert md.pop("b") is not None and list(md) == ["a", "c", "d"]
    seq = nn.Sequential(OrderedDict([("lin", nn.Linear(2, 3)), ("act", nn.ReLU()),
                                     ("out", nn.Linear(3, 1))]))
    assert list(seq.state_dict()) == ["lin.weight", "lin.bias", "out.weight", "out.bias"]
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and head[-1] is seq[1]
    assert head(dl.tensor(rand_np((4, 2)))).shape == (4, 3)


# ---- embedding ---------------------------------------------------------------------------
def test_embedding_padding_idx():
    ours, ref = _pair("Embedding", 6, 3, padding_idx=-2)
    assert ours.padding_idx == 4 == ref.padding_idx
    assert np.all(ours.weight.numpy()[4] == 0) and np.any(ours.weight.numpy()[3] != 0)
    with torch.no_grad():
        ref.weight[4] = 0.5  # a padding row that is not zero still passes no gradient
    idx = np.array([[4, 1, 4], [0, 4, 5]])
    _compare(ours, ref, idx)
    assert np.all(ours.weight.grad.numpy()[4] == 0)


def test_embedding_from_pretrained():
    w = rand_np((4, 3), 1)
    ours = nn.Embedding.from_pretrained(dl.tensor(w), padding_idx=0)
    ref = torch.nn.Embedding.from_pretrained(torch.tensor(w), padding_idx=0)
    assert not ours.weight.requires_grad and ours.padding_idx == 0
    idx = np.array([0, 3, 2])
    close(ours(dl.tensor(idx)), ref(torch.tensor(idx)))
    trainable = nn.Embedding.from_pretrained(dl.tensor(w), freeze=False)
    assert trainable.weight.requires_grad


def test_embedding_every_runtime(dev):
    ours, ref = _pair("Embedding", 5, 4, padding_idx=0)
    _compare(ours, ref, np.array([[0, 2, 0], [3, 4, 2]], np.int32), device=dev)


# ---- recurrent layers --------------------------------------------------------------------
RNN_CASES = [
    dict(),
    dict(num_layers=2, batch_first=True, bidirectional=True),
    dict(bias=False, num_layers=2),
]


@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
@pytest.mark.parametrize("kw", RNN_CASES)
def test_rnn(mode, kw):
    """output and the final states (h_n; LSTM: (h_n, c_n)), all in the loss."""
    ours, ref = _pair(mode, 3, 4, **kw)
    x = rand_np((2, 3, 3) if kw.get("batch_first") else (3, 2, 3), 1)
    _compare(ours, ref, x)


def test_rnn_parameter_names():
    ours, ref = _pair("LSTM", 3, 4, num_layers=2, bidirectional=True)
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert tuple(ours.weight_ih_l1_reverse.shape) == (16, 8)
    b = 1 / np.sqrt(4)
    assert all(np.abs(p.numpy()).max() <= b for p in ours.parameters())


class _WithState(torch.nn.Module):
    """m(x, h0) or m(x, (h0, c0)) from positional tensors."""

    def __init__(self, m, lstm: bool):
        super().__init__()
        self.m, self.lstm = m, lstm

    def forward(self, x, h0, c0=None):
        return self.m(x, (h0, c0)) if self.lstm else self.m(x, h0)


class _OursWithState(nn.Module):
    """_WithState for our modules."""

    def __init__(self, m, lstm: bool):
        super().__init__()
        self.m, self.lstm = m, lstm

    def forward(self, x, h0, c0=None):
        return self.m(x, (h0, c0)) if self.lstm else self.m(x, h0)


@pytest.mark.parametrize("mode", ["GRU", "LSTM", "GRUCell", "LSTMCell"])
def test_rnn_initial_state(mode):
    """Given h0 (and c0): the output, the final states and the states' gradients."""
    lstm, cell = mode.startswith("LSTM"), mode.endswith("Cell")
    ours, ref = _pair(mode, 3, 4, **({} if cell else dict(num_layers=2)))
    x = rand_np((2, 3) if cell else (3, 2, 3), 1)
    states = [rand_np((2, 4) if cell else (2, 2, 4), s) for s in ((2, 3) if lstm else (2,))]
    _compare(_OursWithState(ours, lstm), _WithState(ref, lstm), x, *states)


@pytest.mark.parametrize("mode", ["GRUCell", "LSTMCell"])
def test_cells_zero_state(mode):
    ours, ref = _pair(mode, 3, 4)
    _compare(ours, ref, rand_np((2, 3), 1))
    _compare(ours, ref, rand_np((3,), 3))  # unbatched


def test_rnn_unbatched():
    ours, ref = _pair("GRU", 3, 4, batch_first=True)
    _compare(ours, ref, rand_np((4, 3), 1))


@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
def test_rnn_dropout_between_layers(mode):
    """eval: dropout off (torch's output); training with p=1: the second layer sees zeros,
    as a torch layer with zero input weights in layer 1 does."""
    ours, ref = _pair(mode, 3, 4, num_layers=2, dropout=1.0)
    x = rand_np((3, 2, 3), 1)
    ours.eval()
    ref.eval()
    _compare(ours, ref, x, out=lambda y: y[0])
    ours.train()
    with torch.no_grad():
        ref.weight_ih_l1.zero_()
    y = ours(dl.tensor(x))[0]
    close(y, ref(torch.tensor(x))[0], rtol=1e-4, atol=1e-5)


def test_recurrent_every_runtime(dev):
    ours, ref = _pair("GRU", 3, 4, batch_first=True)  # fewer kernels to compile than LSTM
    _compare(ours, ref, rand_np((2, 2, 3), 1), device=dev)


# ---- attention, decoder layer, dropout -------------------------------------------------------
def _causal(n):
    return np.triu(np.full((n, n), -np.inf, np.float32), 1)


@pytest.mark.parametrize("norm_first,act,batch_first", [(False, "relu", False),
                                                        (True, "gelu", True)])
def test_decoder_layer(norm_first, act, batch_first):
    torch.manual_seed(0)
    kw = dict(dim_feedforward=16, dropout=0.0, activation=act, norm_first=norm_first,
              batch_first=batch_first)
    ours = nn.TransformerDecoderLayer(8, 2, **kw)
    ref = torch.nn.TransformerDecoderLayer(8, 2, **kw)
    tgt = rand_np((2, 4, 8) if batch_first else (4, 2, 8), 1)
    mem = rand_np((2, 3, 8) if batch_first else (3, 2, 8), 2)
    _compare(ours, ref, tgt, mem)
    pad = np.array([[False, False, True], [False, False, False]])
    _decoder_masks(ours, ref, tgt, mem, pad)


def _decoder_masks(ours, ref, tgt, mem, pad):
    """tgt_mask (causal, float), memory_key_padding_mask (bool) and tgt_is_causal."""
    class Ref(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, t, m, mask, p):
            return self.m(t, m, tgt_mask=mask, memory_key_padding_mask=p,
                          tgt_is_causal=True)

    class Ours(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, t, m, mask, p):
            return self.m(t, m, tgt_mask=mask, memory_key_padding_mask=p,
                          tgt_is_causal=True)
    _compare(Ours(ours), Ref(ref), tgt, mem, _causal(4), pad)


def test_decoder_layer_every_runtime(dev):
    torch.manual_seed(0)
    kw = dict(dim_feedforward=8, dropout=0.0, batch_first=True)
    ours = nn.TransformerDecoderLayer(4, 2, **kw)
    ref = torch.nn.TransformerDecoderLayer(4, 2, **kw)
    ours.to(dev)
    _compare(ours, ref, rand_np((1, 3, 4), 1), rand_np((1, 2, 4), 2), device=dev)


def test_decoder_layer_dropout_train_eval():
    """eval ignores dropout (torch's output); in training, dropout p=1 zeroes each block's
    output, so a pre-norm layer returns tgt itself."""
    torch.manual_seed(0)
    ours = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.3)
    ref = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.3)
    ours.eval()
    ref.eval()
    tgt, mem = rand_np((4, 2, 8), 1), rand_np((3, 2, 8), 2)
    _compare(ours, ref, tgt, mem)
    drop = nn.TransformerDecoderLayer(8, 2, 16, dropout=1.0, norm_first=True)
    close(drop(dl.tensor(tgt), dl.tensor(mem)), torch.tensor(tgt), rtol=0, atol=0)
    assert drop.training and drop.dropout.p == 1.0


def test_attention_dropout_statistics():
    """MultiheadAttention in training drops attention weights with probability p and scales
    the kept ones by 1/(1-p) (the weights it returns are the dropped ones, as torch's);
    eval is deterministic."""
    mha = nn.MultiheadAttention(8, 2, dropout=0.4)
    x = dl.tensor(rand_np((32, 8, 8), 1))
    mha.eval()
    _, w_eval = mha(x, x, x, average_attn_weights=False)
    _, w_eval2 = mha(x, x, x, average_attn_weights=False)
    np.testing.assert_array_equal(w_eval.numpy(), w_eval2.numpy())
    mha.train()
    _, w = mha(x, x, x, average_attn_weights=False)
    w, we = w.numpy(), w_eval.numpy()
    kept = w != 0
    assert abs(1 - kept.mean() - 0.4) < 0.02
    np.testing.assert_allclose(w[kept], we[kept] / 0.6, rtol=1e-5)


def test_encoder_layer_callable_activation():
    torch.manual_seed(0)
    ours = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=F.gelu)
    ref = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu")
    _compare(ours, ref, rand_np((3, 2, 8), 1))


def test_encoder_layer_dropout_eval_matches_torch():
    torch.manual_seed(0)
    ours = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    ref = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    ours.eval()
    ref.eval()
    _compare(ours, ref, rand_np((4, 2, 8), 1))
    ours.train()
    x = dl.tensor(rand_np((4, 2, 8), 1))
    assert not np.allclose(ours(x).numpy(), ref(torch.tensor(x.numpy())).detach().numpy())


# ---- the new kernels on the GPU targets ---------------------------------------------------
def _kernel_sources(target: str):
    """The interpolate and adaptive-pool kernels' sources for a C-family target: every mode
    and flag the ops launch, f32 (and f64 where the target has it)."""
    from codegen.cfamily import emit_source
    from cube import f32, f64
    from cube.frontend.translator import Target
    from cube.targets import TARGETS
    from dl.kernels import adaptive_pool as AP
    from dl.kernels import interpolate as IP

    info = TARGETS[target]
    geo = dict(C=3, IH=5, IW=4, OH=7, OW=3)
    variants = []
    for f in (f32,) if target == "msl" else (f32, f64):
        for mode, align, full in ((IP.NEAREST, False, False), (IP.NEAREST_EXACT, False, True),
                                  (IP.LINEAR, False, False), (IP.LINEAR, True, True)):
            variants.append((IP.interp2d, {"F": f}, dict(geo, MODE=mode, ALIGN=align),
                             {"x": 4}))
            variants.append((IP.interp1d_backward, {"F": f},
                             dict(NI=5, NO=7, B=4, K=9, FULL=full, MODE=mode, ALIGN=align),
                             {}))
        variants.append((AP.adaptive_avg_pool2d_fwd, {"F": f}, geo, {"x": 4}))
        variants.append((AP.adaptive_avg_pool2d_bwd, {"F": f},
                         {k: v for k, v in geo.items() if k != "C"}, {}))
    out = []
    for i, (k, tv, ct, ranks) in enumerate(variants):
        sig = k.signature_from_types(type_vars=tv, comptime=ct, ranks=ranks)
        kern = k.build_ir(sig, Target(target, info.features.plane_size, info.features))
        kern.name = f"{k.__name__}_v{i}"
        out.append((f"{k.__name__}#{i}", emit_source(kern, target).text))
    return out


@pytest.mark.parametrize("target", ["cuda", "hip", "msl"])
def test_kernels_compile_for_gpu_targets(target, tmp_path):
    """The new kernels compile with each vendor's real tool (nvcc + ptxas, hipcc, clang++
    with the Metal shim)."""
    from cube.check import tools
    tool = {"cuda": "nvcc", "hip": "hipcc", "msl": "clang++"}[target]
    if tools.find_tool(tool) is None:
        pytest.skip(f"{tool} is not installed")
    sources = _kernel_sources(target)
    if target == "cuda":
        run = tools.cuda(sources, "sm_80", tmp_path)
    elif target == "hip":
        run = tools.hip(sources, tools.hip_archs()[0][0][0], tmp_path)
    else:
        run = tools.msl(sources, "metal-shim", tmp_path)
    assert run.ok, run.error or "\n".join(f"{k}:\n{v}" for k, v in run.failed.items())


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (8, 4)), ("BatchNorm1d", (8, 4, 5)),
                                       ("BatchNorm2d", (4, 3, 5, 5))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_modules_track_stats_as_torch(cls, shape, momentum):
    """BatchNorm1d ((N, C) and (N, C, L)) and BatchNorm2d over three training steps and an
    eval step against torch's, with momentum=None too (the cumulative average: it raised a
    TypeError), buffers included."""
    tm = getattr(torch.nn, cls)(shape[1], momentum=momentum)
    dm = getattr(nn, cls)(shape[1], momentum=momentum)
    dm.load_state_dict({k: dl.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(3)
    for train in (True, True, True, False):
        tm.train(train)
        dm.train(train)
        x = (rng.random(shape) * 3).astype(np.float32)
        np.testing.assert_allclose(dm(dl.tensor(x)).detach().numpy(),
                                   tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(dm.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)


_REFUSED = {
    "conv2d negative padding": lambda m: m.nn.functional.conv2d(
        m.ones(1, 2, 5, 5), m.ones(3, 2, 2, 2), padding=-1),
    "conv_transpose2d bias of 1": lambda m: m.nn.functional.conv_transpose2d(
        m.ones(1, 2, 4, 4), m.ones(2, 3, 2, 2), bias=m.ones(1)),
    "LSTMCell state of another batch": lambda m: m.nn.LSTMCell(3, 4)(
        m.ones(2, 3), (m.zeros(1, 4), m.zeros(1, 4))),
    "GRUCell state of another batch": lambda m: m.nn.GRUCell(3, 4)(m.ones(2, 3),
                                                                   m.zeros(1, 4)),
    "instance_norm of one spatial element": lambda m: m.nn.functional.instance_norm(
        m.ones(2, 3, 1)),
    "interpolate size with recompute_scale_factor": lambda m: m.nn.functional.interpolate(
        m.ones(1, 1, 2, 2), size=(3, 3), recompute_scale_factor=True),
    "trunc_normal_ with a > b": lambda m: m.nn.init.trunc_normal_(m.ones(3), a=2.0, b=-2.0),
    "pad cropping more than the size": lambda m: m.nn.functional.pad(m.ones(1, 2, 4, 4),
                                                                     (-3, -3)),
    "pad cropping past the other side": lambda m: m.nn.functional.pad(m.ones(1, 2, 4, 4),
                                                                      (-5, 3)),
}


@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_invalid_calls_raise_as_torch(case):
    """Calls torch refuses, refused: each returned a value before (a cropped input, a
    broadcast bias or state, zeros, a constant fill)."""
    with pytest.raises((RuntimeError, ValueError)):
        _REFUSED[case](torch)
    with pytest.raises((RuntimeError, ValueError)):
        _REFUSED[case](dl)
