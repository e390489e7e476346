"""A small character-level GPT trained on examples/data/tiny_text.txt, written as PyTorch code:
only the four import lines below differ from the PyTorch program. Swap them for

    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, Dataset

and the same file trains under PyTorch (tests/examples/test_char_gpt.py does exactly that and
compares the losses step by step).

    python examples/char_gpt.py [--steps 150] [--batch-size 16] [--block-size 32] [--device cpu]

Token and position embeddings, pre-norm blocks of causal self-attention (a lower-triangular
mask buffer, masked_fill, softmax) and a GELU MLP, AdamW with decoupled weight decay on the
matrices only, a cosine learning-rate schedule and gradient-norm clipping; then a sample of
generated text (inverse-CDF sampling written with cumsum and rand: dl has no multinomial).
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import dl as torch  # the PyTorch program has: import torch
from dl import nn  # from torch import nn
from dl.nn import functional as F  # from torch.nn import functional as F
from dl.utils.data import DataLoader, Dataset  # from torch.utils.data import ...

TEXT = Path(__file__).resolve().parent / "data" / "tiny_text.txt"


class CharDataset(Dataset):
    """Every window of block_size + 1 characters: (input, the input shifted by one)."""

    def __init__(self, text: str, block_size: int, chars=None):
        self.chars = sorted(set(text)) if chars is None else chars
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.block_size = block_size
        self.data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> list[int]:
        return [self.stoi[c] for c in s]

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)

    def __len__(self) -> int:
        return len(self.data) - self.block_size

    def __getitem__(self, i):
        chunk = self.data[i:i + self.block_size + 1]
        return chunk[:-1], chunk[1:]


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int, dropout: float):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)  # q, k, v in one matmul
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()  # noqa: N806
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd: int, dropout: float):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int, dropout: float):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size: int, block_size: int, n_layer: int = 2, n_head: int = 4,
                 n_embd: int = 64, dropout: float = 0.0):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, block_size, dropout)
                                     for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))
            elif p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.02)
            elif name.endswith(".bias") and "ln_" not in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets=None):
        B, T = idx.size()  # noqa: N806
        assert T <= self.block_size, f"sequence of {T} is longer than the block {self.block_size}"
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0, generator=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            logits, _ = self(idx_cond)
            probs = F.softmax(logits[:, -1, :] / temperature, dim=-1)
            # torch.multinomial(probs, num_samples=1), by inverse CDF
            u = torch.rand(probs.size(0), 1, generator=generator, device=probs.device)
            idx_next = (torch.cumsum(probs, dim=-1) < u).sum(dim=-1, keepdim=True)
            idx_next = idx_next.clamp(max=probs.size(-1) - 1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def make_optimizer(model, lr: float, weight_decay: float = 0.1):
    """AdamW; matrices decay, biases, norms and nothing else do not (nanoGPT's groups)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def train(model, loader, steps: int, lr: float = 3e-3, grad_clip: float = 1.0,
          device: str = "cpu", log_every: int = 0):
    """`steps` optimiser steps over the loader's batches (epochs repeat as needed); the
    list of losses (floats)."""
    optimizer = make_optimizer(model, lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps,
                                                           eta_min=lr / 10)
    model.train()
    losses, t0 = [], time.perf_counter()
    while len(losses) < steps:
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            _, loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            if log_every and (len(losses) % log_every == 0 or len(losses) == 1):
                print(f"step {len(losses):4d}  loss {losses[-1]:.4f}  "
                      f"lr {scheduler.get_last_lr()[0]:.2e}  "
                      f"{time.perf_counter() - t0:6.1f}s", flush=True)
            if len(losses) == steps:
                break
    return losses


@torch.no_grad()
def evaluate(model, loader, device: str = "cpu", batches: int = 8) -> float:
    model.eval()
    total, n = 0.0, 0
    for x, y in loader:
        _, loss = model(x.to(device), y.to(device))
        total, n = total + loss.item(), n + 1
        if n == batches:
            break
    model.train()
    return total / max(n, 1)


def main(argv=None) -> list[float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=64)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample-len", type=int, default=200)
    ap.add_argument("--text", default=str(TEXT))
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    text = Path(args.text).read_text(encoding="utf-8")
    cut = int(len(text) * 0.9)
    chars = sorted(set(text))
    train_ds = CharDataset(text[:cut], args.block_size, chars)
    val_ds = CharDataset(text[cut:], args.block_size, chars)
    loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(args.seed))
    val_loader = DataLoader(val_ds, batch_size=args.batch_size)
    vocab = len(chars)
    model = GPT(vocab, args.block_size, args.n_layer, args.n_head, args.n_embd,
                args.dropout).to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{len(text)} characters, vocabulary {vocab}, {n_params / 1e3:.1f}k parameters, "
          f"device {args.device}")
    losses = train(model, loader, args.steps, args.lr, device=args.device,
                   log_every=max(1, args.steps // 10))
    print(f"validation loss {evaluate(model, val_loader, args.device):.4f}")
    start = torch.tensor([train_ds.encode("\n")], dtype=torch.long, device=args.device)
    out = model.generate(start, args.sample_len, temperature=0.8,
                         generator=torch.Generator().manual_seed(args.seed))
    print("--- sample ---")
    print(train_ds.decode(out[0].tolist()))
    return losses


if __name__ == "__main__":
    main()
