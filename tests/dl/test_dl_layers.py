"""nn layers against torch.nn with copied weights: forward, input and parameter gradients;
default initialisation statistics."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dl_helpers import close, rand_np

import dl
from dl import nn


def _copy(ours: nn.Module, ref: torch.nn.Module) -> None:
    ours.load_state_dict({k: dl.tensor(v.detach().numpy()) for k, v in
                          ref.state_dict().items()})


def _compare(ours, ref, *inputs, rtol=1e-4, atol=1e-5, kwargs=None, out=lambda y: y,
             modules=None):
    """modules: the (ours, ref) modules whose parameter gradients to compare, when ours and
    ref are wrappers."""
    kwargs = kwargs or {}
    xs = [dl.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    y, ty = out(ours(*xs, **kwargs)), out(ref(*ts, **kwargs))
    close(y, ty, rtol=rtol, atol=atol)
    w = rand_np(ty.shape, 7)
    (y * dl.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for x, t in zip(xs, ts):
        if t.grad is not None:
            close(x.grad, t.grad, rtol=rtol, atol=atol)
    mo, mr = modules or (ours, ref)
    params = dict(mo.named_parameters())
    for name, p in mr.named_parameters():
        close(params[name].grad, p.grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
def test_linear(act):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 5),
                              {"none": torch.nn.Identity(), "relu": torch.nn.ReLU(),
                               "gelu": torch.nn.GELU()}[act])
    ours = nn.Sequential(nn.Linear(6, 5, act=act))
    ours.load_state_dict({"0.weight": dl.tensor(ref[0].weight.detach().numpy()),
                          "0.bias": dl.tensor(ref[0].bias.detach().numpy())})
    _compare(ours, ref, rand_np((3, 2, 6), 1))


def test_conv_pool_batchnorm_stack():
    torch.manual_seed(0)

    def build(m):
        return m.Sequential(m.Conv2d(2, 4, 3, padding=1), m.BatchNorm2d(4), m.ReLU(),
                            m.MaxPool2d(2), m.Conv2d(4, 3, 2, stride=2), m.AvgPool2d(1),
                            m.Flatten(), m.Linear(12, 2))
    ref, ours = build(torch.nn), build(nn)
    _copy(ours, ref)
    _compare(ours, ref, rand_np((3, 2, 8, 8), 1))
    close(ours[1].running_mean, ref[1].running_mean, atol=1e-6)
    close(ours[1].running_var, ref[1].running_var, rtol=1e-5)
    assert ours[1].num_batches_tracked.item() == 1
    ours.eval()
    ref.eval()
    _compare(ours, ref, rand_np((2, 2, 8, 8), 2))


def test_layernorm_embedding():
    torch.manual_seed(0)
    for ours, ref, x in [(nn.LayerNorm((3, 4)), torch.nn.LayerNorm((3, 4)),
                          rand_np((2, 3, 4), 1)),
                         (nn.Embedding(7, 3), torch.nn.Embedding(7, 3),
                          np.array([[1, 6], [0, 1]]))]:
        _copy(ours, ref)
        with torch.no_grad():
            for p in ref.parameters():
                p.add_(torch.rand_like(p))
        _copy(ours, ref)
        _compare(ours, ref, x)


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention(batch_first):
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    ours = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    _copy(ours, ref)
    x = rand_np((3, 5, 8) if batch_first else (5, 3, 8), 1)  # batch 3, sequence 5
    pad = np.zeros((3, 5), bool)
    pad[1, 3:] = True
    mask = np.triu(np.ones((5, 5), bool), 1)
    _compare(lambda q: ours(q, q, q, key_padding_mask=dl.tensor(pad),
                            attn_mask=dl.tensor(mask))[0],
             lambda q: ref(q, q, q, key_padding_mask=torch.tensor(pad),
                           attn_mask=torch.tensor(mask))[0], x, modules=(ours, ref))
    # cross-attention (separate projections) and the averaged weights
    kv = rand_np((3, 4, 8) if batch_first else (4, 3, 8), 2)
    q = rand_np((3, 5, 8) if batch_first else (5, 3, 8), 3)
    o, w = ours(dl.tensor(q), dl.tensor(kv), dl.tensor(kv))
    to, tw = ref(torch.tensor(q), torch.tensor(kv), torch.tensor(kv))
    close(o, to, rtol=1e-4, atol=1e-5)
    close(w, tw, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("norm_first,act", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_layer(norm_first, act):
    torch.manual_seed(0)
    kw = dict(dim_feedforward=16, dropout=0.0, activation=act, batch_first=True,
              norm_first=norm_first)
    ref, ours = torch.nn.TransformerEncoderLayer(8, 2, **kw), nn.TransformerEncoderLayer(8, 2,
                                                                                         **kw)
    _copy(ours, ref)
    _compare(ours, ref, rand_np((2, 5, 8), 1), rtol=1e-4, atol=1e-4)


def test_cross_entropy_loss_module():
    x, t = rand_np((4, 5), 1), np.array([1, 0, 4, 4])
    _compare(nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), x, t)


def test_default_init_like_torch():
    dl.manual_seed(0)
    lin, conv = nn.Linear(400, 300), nn.Conv2d(8, 16, 3)
    for w, fan_in in [(lin.weight, 400), (lin.bias, 400), (conv.weight, 72), (conv.bias, 72)]:
        a = w.numpy()
        bound = 1 / math.sqrt(fan_in)
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.9 * bound
        assert abs(a.std() - bound / math.sqrt(3)) < 0.1 * bound  # U(-b, b)
    mha = nn.MultiheadAttention(16, 4)
    bound = math.sqrt(6 / (16 + 48))
    assert np.abs(mha.in_proj_weight.numpy()).max() <= bound
    assert not mha.in_proj_bias.numpy().any() and not mha.out_proj.bias.numpy().any()
    emb = nn.Embedding(100, 50).weight.numpy()
    assert abs(emb.std() - 1) < 0.05 and abs(emb.mean()) < 0.05
    ln = nn.LayerNorm(5)
    assert (ln.weight.numpy() == 1).all() and (ln.bias.numpy() == 0).all()


def _shared_net(m):
    """A net as users tie modules: one Linear twice, one BatchNorm1d twice, inside a
    nested Sequential."""
    lin, bn = m.Linear(3, 3), m.BatchNorm1d(3)
    return m.Sequential(m.Linear(3, 3), bn, m.Sequential(lin, m.ReLU(), bn), lin)


def test_module_traversal_and_state_dict_match_torch():
    """modules / children / named_buffers / apply visit a shared module once, state_dict
    keys it under every name, module by module (its parameters, its buffers, then its
    children's), as PyTorch's."""
    ours, ref = _shared_net(nn), _shared_net(torch.nn)
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in ref.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in ref.named_children()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in ref.named_buffers()]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert list(ours.state_dict()) == list(ref.state_dict())
    seen: list = []
    ours.apply(lambda m: seen.append(type(m).__name__))
    tseen: list = []
    ref.apply(lambda m: tseen.append(type(m).__name__))
    assert seen == tseen
    # torch's state_dict loads (every key, the shared ones under each name); the forward
    # then matches
    ours.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    x = rand_np((4, 3), 5)
    ours.eval()
    ref.eval()
    close(ours(dl.tensor(x)), ref(torch.tensor(x)), rtol=1e-5, atol=1e-6)


def test_module_to_keeps_tied_parameters_tied():
    emb, head = nn.Embedding(5, 4), nn.Linear(4, 5, bias=False)
    head.weight = emb.weight
    net = nn.ModuleList([emb, head]).to(dl.float64)
    assert net[1].weight is net[0].weight and net[0].weight.dtype is dl.float64
    assert len(list(net.parameters())) == 1
