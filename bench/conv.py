"""conv2d on the CPU beside torch (oneDNN), in one run: the library's public launcher
(autotuned: the direct blocked kernels of dl/kernels/conv_direct.py beside im2col + matmul)
and each of its main candidates, timed in turns with torch (`paired_medians`: medians after
warm-up), for ResNet-style shapes; plus the input and weight gradients dl computes.

    python bench/conv.py [--quick] [--single] [--out bench/results/NAME.md]

--single: both sides on one thread (our pool of 1, torch.set_num_threads(1)), timed by the
thread's CPU time: a per-core comparison that other processes on a shared machine barely
move (on 2 busy cores torch's OpenMP threads spin and its 2-thread times swing by 30x).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402
from run import machine, paired_medians  # noqa: E402

import cube as cb  # noqa: E402
from dl.kernels import conv as C  # noqa: E402
from dl.kernels.conv_direct import tile_width  # noqa: E402

# (x shape, out channels, kernel, stride, padding): the goal's shape first
SHAPES = [((2, 64, 56, 56), 64, 3, 1, 1),
          ((1, 64, 56, 56), 64, 3, 1, 1),
          ((1, 128, 28, 28), 128, 3, 1, 1),
          ((1, 256, 14, 14), 256, 3, 1, 1),
          ((1, 512, 7, 7), 512, 3, 1, 1),
          ((1, 64, 56, 56), 128, 3, 2, 1),
          ((1, 256, 56, 56), 64, 1, 1, 0),
          ((1, 64, 56, 56), 256, 1, 1, 0),
          ((1, 256, 56, 56), 512, 1, 2, 0),
          ((32, 64, 56, 56), 64, 3, 1, 1)]
QUICK = SHAPES[:1] + SHAPES[5:7]
CANDS = ("blocked_2", "blocked_4", "pix_1x1_r0", "pix_1x1_r1", "rows")


CLOCK = time.perf_counter


def _paired(fns, repeat: int, warmup: int = 2, block: int = 5) -> list[float]:
    """`paired_medians` (turns of `block` runs, each after an untimed one) on CLOCK."""
    return paired_medians(fns, repeat=repeat, warmup=warmup, block=block,
                          pause=0.01 if CLOCK is time.perf_counter else 0.0, clock=CLOCK)


def _name(xs, oc, k, s, p) -> str:
    return f"({','.join(map(str, xs))}) {oc}x{k}x{k} s{s} p{p}"


def _only(tunable, name, fn):
    def run():
        with tunable.only(name):
            fn()
    return run


def bench_forward(rt, xs, oc, k, s, p, repeat):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((oc, xs[1], k, k)).astype(np.float32)
    dx, dw = rt.from_numpy(x), rt.from_numpy(w)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)

    def ours():
        C.conv2d(rt, dx, dw, stride=s, padding=p)
    ours()  # autotune here, before timing
    oh = (xs[2] + 2 * p - k) // s + 1
    cfg = dict(G=1, KH=k, KW=k, SH=s, SW=s, PH=p, PW=p, DH=1, DW=1, ACT="none")
    out = rt.empty((xs[0], oc, oh, oh), dx.elem)
    cands = [c for c in CANDS if C.CONV[c].is_valid(rt, dx, dw, None, out, cfg)]
    fns = [ours, lambda: TF.conv2d(tx, tw, stride=s, padding=p)]
    fns += [_only(C.CONV, c, ours) for c in cands]
    ts = _paired(fns, repeat)
    got = C.conv2d(rt, dx, dw, stride=s, padding=p).numpy()
    ref = TF.conv2d(tx.double(), tw.double(), stride=s, padding=p).numpy()
    err = float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))
    flops = 2 * xs[0] * oc * oh * oh * xs[1] * k * k
    return dict(name=_name(xs, oc, k, s, p), ours=ts[0], torch=ts[1], flops=flops, err=err,
                cands={c: t for c, t in zip(cands, ts[2:])},
                rw={nb: tile_width(rt, oh, k, nb) for nb in (2, 4)})


def bench_backward(rt, xs, oc, k, s, p, repeat):
    """The input gradient (tuned: direct on flipped weights, or matmul + col2im) and the
    weight gradient (im2col + matmul, as dl computes it) beside torch's."""
    import dl
    import dl.nn.functional as F
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((oc, xs[1], k, k)).astype(np.float32)
    oh = (xs[2] + 2 * p - k) // s + 1
    g = rng.standard_normal((xs[0], oc, oh, oh)).astype(np.float32)
    g_rows = np.ascontiguousarray(g.transpose(1, 0, 2, 3).reshape(oc, -1))
    dg, dgr, dw = rt.from_numpy(g), rt.from_numpy(g_rows), rt.from_numpy(w)
    tg, tw, tx = torch.from_numpy(g), torch.from_numpy(w), torch.from_numpy(x)

    def gx():
        C.conv2d_grad_input(rt, dg, dgr, dw, xs, s, p, 1)
    gx()
    fns = [gx, lambda: torch.nn.grad.conv2d_input(xs, tw, tg, s, p)]
    gcands = ("blocked_2", "col2im") if s == 1 else ("phases_2", "col2im")
    fns += [_only(C.CONV_GRAD_INPUT, c, gx) for c in gcands]
    ts = _paired(fns, repeat)
    rows = [dict(name="grad input " + _name(xs, oc, k, s, p), ours=ts[0], torch=ts[1],
                 flops=2 * xs[0] * oc * oh * oh * xs[1] * k * k, err=None,
                 cands=dict(zip(gcands, ts[2:])), rw={})]
    # the weight gradient through dl (x needs no gradient: only gw is computed)
    X = dl.tensor(x, device=rt.name)
    W = dl.tensor(w, device=rt.name, requires_grad=True)
    G = dl.tensor(g, device=rt.name)

    def gw():
        W.grad = None
        F.conv2d(X, W, stride=s, padding=p).backward(G)
        W.grad.numpy()

    tW = tw.clone().requires_grad_(True)

    def tgw():
        tW.grad = None
        TF.conv2d(tx, tW, stride=s, padding=p).backward(tg)
    gw()
    ts = _paired([gw, tgw], repeat)
    rows.append(dict(name="forward + grad weight (dl / torch autograd) " + _name(xs, oc, k, s, p),
                     ours=ts[0], torch=ts[1], flops=4 * xs[0] * oc * oh * oh * xs[1] * k * k,
                     err=None, cands={}, rw={}))
    return rows


def table(rows) -> str:
    out = ["| shape | ours ms | torch ms | torch/ours | ours GFLOP/s | candidates ms "
           "(torch/candidate) | rel. err |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        cands = ", ".join(f"{c} {t * 1e3:.3f} ({r['torch'] / t:.2f}x)"
                          for c, t in r["cands"].items())
        err = "" if r["err"] is None else f"{r['err']:.1e}"
        out.append(f"| {r['name']} | {r['ours'] * 1e3:.3f} | {r['torch'] * 1e3:.3f} | "
                   f"{r['torch'] / r['ours']:.2f}x | {r['flops'] / r['ours'] / 1e9:.0f} | "
                   f"{cands} | {err} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--single", action="store_true")
    a = ap.parse_args()
    if a.single:
        global CLOCK
        from runtimes import cpu_pool
        cpu_pool._pool = cpu_pool.Pool(1)
        torch.set_num_threads(1)
        CLOCK = time.thread_time
    rt = cb.runtime("cpu")
    rows = []
    for xs, oc, k, s, p in (QUICK if a.quick else SHAPES):
        rep = max(3, a.repeat // 3) if xs[0] >= 32 else a.repeat
        rows.append(bench_forward(rt, xs, oc, k, s, p, rep))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    for xs, oc, k, s, p in ([SHAPES[0], SHAPES[5]] if not a.quick else [SHAPES[0]]):
        for r in bench_backward(rt, xs, oc, k, s, p, a.repeat):
            rows.append(r)
            print(table([r]).splitlines()[-1], flush=True)
    m = machine()
    head = (f"# conv2d on {m['cpu']}, {m['cores']} cores: ours vs torch {torch.__version__} "
            f"(oneDNN), torch threads {torch.get_num_threads()}\n\n"
            "`python bench/conv.py" + (" --quick" if a.quick else "")
            + (" --single" if a.single else "") + "`: medians of "
            f"{a.repeat} runs after warm-up, ours and torch timed in turns "
            "(`paired_medians`); `ours` is the autotuned public launcher"
            + ("; ONE thread each, thread CPU time" if a.single else "") + ".\n\n")
    text = head + table(rows) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
