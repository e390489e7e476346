"""One rank of a distributed test run: `mpirun -n N python worker.py SUITE OUTDIR [ARGS]`.

Runs many checks in one launch (mpirun costs about a second per start) and writes this rank's
results to OUTDIR/rank<r>.json: {"checks": {name: "ok" | error text}, ...}. The suites:
collectives (every collective x float dtype x runtime against NumPy), ddp (DDP against one
process, bucket overlap, no_sync, dl.capture, unused parameters), timeout and die (a rank
that hangs or dies: the others must not hang), nccl (the nccl backend on a GPU)."""
# ruff: noqa: B023  (each check's closure runs at once, inside its loop iteration)
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import numpy as np

import dl
import dl.distributed as dist
from dl import nn

FLOATS = ["float32", "float64", "float16", "bfloat16"]
TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}

checks: dict[str, str] = {}
extra: dict = {}


def check(name: str):
    def run(fn):
        try:
            fn()
            checks[name] = "ok"
        except Exception:  # noqa: BLE001 - reported, not raised
            checks[name] = traceback.format_exc(limit=6)
        return fn
    return run


def values(rank: int, shape, dt: str, seed: int = 0) -> np.ndarray:
    """Rank r's input: exactly representable in every float dtype (so NumPy's expected values
    are exact up to the result's own rounding)."""
    rng = np.random.default_rng(seed * 100 + rank)
    return (rng.integers(-64, 64, size=shape) / 8.0).astype(np.float32)


def rounded(x: np.ndarray, dt: str) -> np.ndarray:
    return dl.tensor(np.asarray(x, np.float64), dtype=dt).numpy().astype(np.float64)


def close(got, want, dt, what):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape} != {want.shape}")
    if not np.allclose(got, want, rtol=TOL[dt], atol=TOL[dt]):
        raise AssertionError(f"{what}: max error {np.abs(got - want).max()} "
                             f"\n got {got.ravel()[:6]}\nwant {want.ravel()[:6]}")


# ---- collectives -----------------------------------------------------------------------------

def collectives(devices: list[str], floats: list[str]) -> None:
    @check("before_init_raises")
    def _():
        try:
            dist.all_reduce(dl.zeros(2))
        except RuntimeError as e:
            assert "init_process_group" in str(e), e
            return
        raise AssertionError("no error before init_process_group")

    dist.init_process_group("mpi", timeout=60)
    r, n = dist.get_rank(), dist.get_world_size()
    extra["world"] = n

    @check("world")
    def _():
        assert dist.is_initialized() and n == int(os.environ["OMPI_COMM_WORLD_SIZE"])
        assert r == int(os.environ["OMPI_COMM_WORLD_RANK"])

    shape = (3, 5)
    for dev in devices:
        for dt in floats:
            xs = [values(k, shape, dt) for k in range(n)]
            mine = lambda: dl.tensor(xs[r], dtype=dt, device=dev)  # noqa: E731
            stack = np.stack([rounded(x, dt) for x in xs])
            for op, ref in (("SUM", stack.sum(0)), ("AVG", stack.mean(0)),
                            ("MAX", stack.max(0)), ("MIN", stack.min(0))):
                @check(f"all_reduce_{op}_{dt}_{dev}")
                def _():
                    t = mine()
                    assert dist.all_reduce(t, op=getattr(dist.ReduceOp, op)) is None
                    close(t.numpy(), rounded(ref, dt), dt, "all_reduce")

            @check(f"all_reduce_async_{dt}_{dev}")
            def _():
                t = mine()
                w = dist.all_reduce(t, async_op=True)
                w.wait()
                assert w.is_completed()
                close(t.numpy(), rounded(stack.sum(0), dt), dt, "async all_reduce")

            @check(f"all_reduce_noncontiguous_{dt}_{dev}")
            def _():
                t = mine().t()  # a transposed view: staged and written back
                dist.all_reduce(t)
                close(t.numpy(), rounded(stack.sum(0), dt).T, dt, "strided all_reduce")

            @check(f"broadcast_{dt}_{dev}")
            def _():
                src = n - 1
                t = mine()
                dist.broadcast(t, src=src)
                close(t.numpy(), stack[src], dt, "broadcast")

            @check(f"all_gather_{dt}_{dev}")
            def _():
                outs = [dl.zeros(*shape, dtype=dt, device=dev) for _ in range(n)]
                dist.all_gather(outs, mine())
                for k in range(n):
                    close(outs[k].numpy(), stack[k], dt, f"all_gather[{k}]")

            @check(f"all_gather_into_tensor_{dt}_{dev}")
            def _():
                out = dl.zeros(n * shape[0], shape[1], dtype=dt, device=dev)
                dist.all_gather_into_tensor(out, mine())
                close(out.numpy(), stack.reshape(n * shape[0], shape[1]), dt,
                      "all_gather_into_tensor")

            @check(f"reduce_scatter_{dt}_{dev}")
            def _():
                ins = [dl.tensor(values(r, shape, dt, seed=k + 1), dtype=dt, device=dev)
                       for k in range(n)]
                out = dl.zeros(*shape, dtype=dt, device=dev)
                dist.reduce_scatter(out, ins)
                want = sum(rounded(values(q, shape, dt, seed=r + 1), dt) for q in range(n))
                close(out.numpy(), rounded(want, dt), dt, "reduce_scatter")

            @check(f"reduce_scatter_tensor_{dt}_{dev}")
            def _():
                big = np.stack([values(r, shape, dt, seed=k + 1) for k in range(n)])
                inp = dl.tensor(big.reshape(n * shape[0], shape[1]), dtype=dt, device=dev)
                out = dl.zeros(*shape, dtype=dt, device=dev)
                dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.AVG)
                want = sum(rounded(values(q, shape, dt, seed=r + 1), dt) for q in range(n)) / n
                close(out.numpy(), rounded(want, dt), dt, "reduce_scatter_tensor avg")

    @check("all_reduce_large_chunked")
    def _():  # 12 MB: more than one of all_reduce's 8 MB pieces, blocking and async
        base = (np.arange(3 << 20) % 1000).astype(np.float32)
        t = dl.tensor(base * (r + 1))
        dist.all_reduce(t)
        close(t.numpy(), base * (n * (n + 1) / 2), "float32", "chunked")
        t = dl.tensor(base * (r + 1))
        dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True).wait()
        close(t.numpy(), base * ((n + 1) / 2), "float32", "chunked async avg")

    if "opencl" in devices:
        @check("opencl_cpu_zero_copy")
        def _():  # PoCL: MPI works in the mapped buffer itself
            from dl.distributed import collectives
            t = dl.tensor(values(r, (4,), "float32"), device="opencl")
            collectives._maps = maps = []
            try:
                arr = collectives._map_opencl(t)
            finally:
                collectives._maps = None
            assert arr is not None and len(maps) == 1
            arr[...] = 7.0
            maps[0].release()
            close(t.numpy(), np.full(4, 7.0), "float32", "mapped write")

    @check("threaded")
    def _():
        from dl.distributed import process_group
        extra["threaded"] = process_group.current()._threaded

    @check("barrier")
    def _():
        dist.barrier()
        dist.barrier(async_op=True).wait()

    @check("zero_copy_host")
    def _():
        t = dl.tensor(values(r, (4,), "float32"))
        before = t.numpy()  # a view of t's memory: the reduction lands in it
        dist.all_reduce(t)
        close(before, sum(values(k, (4,), "float32") for k in range(n)), "float32", "view")

    @check("mismatch_detected")
    def _():
        dist.set_debug(True)
        try:
            dist.all_reduce(dl.zeros(2 + r))  # other shapes on every rank
        except RuntimeError as e:
            assert "different" in str(e) and "rank 1" in str(e), e
        else:
            raise AssertionError("mismatched shapes were not detected")
        try:
            dist.all_reduce(dl.zeros(2, dtype="float64" if r else "float32"))
        except RuntimeError as e:
            assert "float64" in str(e), e
        else:
            raise AssertionError("mismatched dtypes were not detected")
        t = dl.ones(3)
        dist.all_reduce(t)  # matching calls still work in checked mode
        close(t.numpy(), np.full(3, n), "float32", "checked all_reduce")
        dist.set_debug(False)

    @check("sampler")
    def _():
        for size, drop in ((10, False), (10, True), (2, False)):
            s = dist.DistributedSampler(list(range(size)), shuffle=True, seed=3,
                                        drop_last=drop)
            s.set_epoch(1)
            mine = list(s)
            assert len(mine) == len(s)
            every = [_epoch(size, n, k, drop) for k in range(n)]
            assert every[r] == mine, (every[r], mine)
            flat = sorted(i for part in every for i in part)
            if drop:
                assert len(set(flat)) == len(flat) == (size // n) * n
            else:
                assert set(flat) == set(range(size)) and len(flat) == len(s) * n
        a = list(dist.DistributedSampler(range(10), n, r, seed=3))
        s = dist.DistributedSampler(range(10), n, r, seed=3)
        s.set_epoch(1)
        assert list(s) != a or n > 5  # set_epoch reshuffles
        plain = list(dist.DistributedSampler(range(7), n, r, shuffle=False))
        assert plain == ([*range(7)] + [*range(7)])[:len(plain) * n][r::n]


def _epoch(size, n, k, drop):
    s = dist.DistributedSampler(list(range(size)), n, k, shuffle=True, seed=3, drop_last=drop)
    s.set_epoch(1)
    return list(s)


# ---- DDP -------------------------------------------------------------------------------------

def mlp(seed=0):
    dl.manual_seed(seed)
    return nn.Sequential(nn.Linear(20, 32, act="relu"), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 4))


def batch(step, size=24):
    rng = np.random.default_rng(step)
    return (rng.standard_normal((size, 20)).astype(np.float32),
            rng.integers(0, 4, size).astype(np.int64))


def reference(steps, size=24, accumulate=1):
    """One process, the whole batch (accumulate: micro-batches summed, as no_sync does)."""
    model = mlp()
    opt = dl.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    for s in range(steps):
        opt.zero_grad()
        for a in range(accumulate):
            x, y = batch(s * accumulate + a, size)
            loss_fn(model(dl.tensor(x)), dl.tensor(y)).backward()
        opt.step()
    return [p.numpy().copy() for p in model.parameters()]


def shard(x, r, n):
    per = len(x) // n
    return x[r * per:(r + 1) * per]


def ddp_suite() -> None:
    dist.init_process_group("mpi", timeout=60)
    r, n = dist.get_rank(), dist.get_world_size()
    loss_fn = nn.CrossEntropyLoss()
    steps = 3

    def same(model, want, what, tol=1e-5):
        for i, (p, w) in enumerate(zip(model.parameters(), want)):
            if not np.allclose(p.numpy(), w, rtol=tol, atol=tol):
                raise AssertionError(f"{what}: parameter {i} differs by "
                                     f"{np.abs(p.numpy() - w).max()}")
        mine = np.concatenate([p.numpy().ravel() for p in model.parameters()])
        outs = [dl.zeros(mine.size) for _ in range(n)]
        dist.all_gather(outs, dl.tensor(mine))
        for o in outs:  # bitwise the same on every rank
            assert np.array_equal(o.numpy(), mine), f"{what}: ranks differ"

    want = reference(steps)

    @check("ddp_broadcast_at_wrap")
    def _():
        model = mlp(seed=r)  # different weights per rank: rank 0's win
        ddp = nn.parallel.DistributedDataParallel(model)
        ref = mlp(seed=0)
        for p, q in zip(ddp.parameters(), ref.parameters()):
            assert np.array_equal(p.numpy(), q.numpy())

    def train(ddp_kwargs=None, capture=False, accumulate=1, events=False):
        model = mlp(seed=r)
        ddp = nn.parallel.DistributedDataParallel(model, **(ddp_kwargs or {}))
        if events:
            ddp.events = []
        opt = dl.optim.Adam(ddp.parameters(), lr=1e-2)

        def step(x, y):
            opt.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()
            opt.step()
            return loss
        if capture:
            step = dl.capture(step)
        for s in range(steps):
            if accumulate == 1:
                x, y = batch(s)
                step(dl.tensor(shard(x, r, n)), dl.tensor(shard(y, r, n)))
                continue
            opt.zero_grad()
            for a in range(accumulate):
                x, y = batch(s * accumulate + a)
                xb, yb = dl.tensor(shard(x, r, n)), dl.tensor(shard(y, r, n))
                if a < accumulate - 1:
                    with ddp.no_sync():
                        loss_fn(ddp(xb), yb).backward()
                else:
                    loss_fn(ddp(xb), yb).backward()
            opt.step()
        return ddp

    @check("ddp_adam_matches_one_process")
    def _():
        same(train(), want, "one bucket")

    @check("ddp_small_buckets_overlap")
    def _():
        ddp = train({"bucket_cap_mb": 0.002}, events=True)
        same(ddp, want, "small buckets")
        assert len(ddp.bucket_sizes) >= 3, ddp.bucket_sizes
        ev = ddp.events[-(len(list(ddp.parameters())) + 2 * len(ddp.bucket_sizes)):]
        first_start = ev.index(("start", 0))
        last_grad = max(i for i, e in enumerate(ev) if e[0] == "grad")
        assert first_start < last_grad, ev  # communication began during backward
        assert ev[-1][0] == "wait" and all(e[0] == "wait" for e in ev[-len(ddp.bucket_sizes):])
        extra["events"] = [list(e) for e in ev]

    @check("ddp_capture_replays")
    def _():
        same(train({"bucket_cap_mb": 0.002}, capture=True), want, "dl.capture")

    @check("ddp_no_sync_accumulates")
    def _():
        ddp = train(accumulate=2)
        want2 = reference(steps, accumulate=2)
        # one process sums two micro-batch means; DDP averages over the ranks of each sum
        same(ddp, want2, "no_sync")

    @check("ddp_unused_parameters")
    def _():
        class Two(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 2)
                self.b = nn.Linear(4, 2)

            def forward(self, x):
                return self.a(x) if r == 0 else self.a(x) + self.b(x)
        dl.manual_seed(0)
        ddp = nn.parallel.DistributedDataParallel(Two(), find_unused_parameters=True)
        ddp(dl.ones(3, 4)).sum().backward()
        g = ddp.module.b.weight.grad.numpy()
        assert np.allclose(g, 3.0 * (n - 1) / n), g  # rank 0 contributed zeros
        # without find_unused_parameters, b (unused on every rank here) is reported by the
        # next forward (the bucket holding it never started, on any rank: nothing hangs)
        dl.manual_seed(0)
        strict = nn.parallel.DistributedDataParallel(Two())
        strict.module.forward = lambda x: strict.module.a(x)
        strict(dl.ones(3, 4)).sum().backward()
        try:
            strict(dl.ones(3, 4))
        except RuntimeError as e:
            assert "b.weight" in str(e) and "find_unused_parameters" in str(e), e
        else:
            raise AssertionError("an unused parameter went unreported")


class Affine(nn.Module):
    """A model without matmuls (each matmul shape is a kernel build per process: slow on a
    crowded machine with three ranks)."""

    def __init__(self, seed):
        super().__init__()
        dl.manual_seed(seed)
        self.w = nn.Parameter(dl.randn(5))
        self.b = nn.Parameter(dl.zeros(1))

    def forward(self, x):
        return (x * self.w).sum(1) + self.b


def uneven_ddp() -> None:
    """n ranks on a batch of 24 (n = 3: 8 each): same parameters as one process."""
    r, n = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((2, 24, 5)).astype(np.float32)
    ys = rng.standard_normal((2, 24)).astype(np.float32)

    def run(model, rows):
        opt = dl.optim.Adam(model.parameters(), lr=1e-2)
        for s in range(2):
            opt.zero_grad()
            err = model(dl.tensor(xs[s][rows])) - dl.tensor(ys[s][rows])
            (err * err).mean().backward()
            opt.step()
        return [p.numpy().copy() for p in model.parameters()]
    want = run(Affine(0), slice(None))

    @check("ddp_world_n")
    def _():
        ddp = nn.parallel.DistributedDataParallel(Affine(r))
        per = 24 // n
        got = run(ddp, slice(r * per, (r + 1) * per))
        for p, w in zip(got, want):
            assert np.allclose(p, w, rtol=1e-5, atol=1e-5), np.abs(p - w).max()


# ---- failures --------------------------------------------------------------------------------

def timeout_suite() -> None:
    dist.init_process_group("mpi", timeout=2)
    if dist.get_rank() == 1:
        time.sleep(120)  # hangs: never joins the all-reduce
    dist.all_reduce(dl.ones(4))
    checks["unreachable"] = "the all-reduce returned without rank 1"


def die_suite() -> None:
    dist.init_process_group("mpi", timeout=60)
    if dist.get_rank() == 1:
        os._exit(3)
    dist.all_reduce(dl.ones(4))


# ---- NCCL ------------------------------------------------------------------------------------

def nccl_suite() -> None:
    dist.init_process_group("nccl", timeout=60)
    r, n = dist.get_rank(), dist.get_world_size()
    for dt in FLOATS:
        xs = [values(k, (3, 5), dt) for k in range(n)]
        stack = np.stack([rounded(x, dt) for x in xs])
        for op, ref in (("SUM", stack.sum(0)), ("AVG", stack.mean(0)), ("MAX", stack.max(0))):
            @check(f"nccl_all_reduce_{op}_{dt}")
            def _():
                t = dl.tensor(xs[r], dtype=dt, device="cuda")
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                close(t.numpy(), rounded(ref, dt), dt, "nccl all_reduce")

        @check(f"nccl_broadcast_gather_scatter_{dt}")
        def _():
            t = dl.tensor(xs[r], dtype=dt, device="cuda")
            dist.broadcast(t, src=0)
            close(t.numpy(), stack[0], dt, "nccl broadcast")
            outs = [dl.zeros(3, 5, dtype=dt, device="cuda") for _ in range(n)]
            dist.all_gather(outs, dl.tensor(xs[r], dtype=dt, device="cuda"))
            for k in range(n):
                close(outs[k].numpy(), stack[k], dt, "nccl all_gather")
            out = dl.zeros(3, 5, dtype=dt, device="cuda")
            dist.reduce_scatter_tensor(out, dl.tensor(np.concatenate([xs[r]] * n), dtype=dt,
                                                      device="cuda"))
            close(out.numpy(), stack.sum(0), dt, "nccl reduce_scatter")

    @check("nccl_ddp")
    def _():
        loss_fn = nn.CrossEntropyLoss()
        want = reference(3)
        model = mlp().to("cuda")
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.002)
        opt = dl.optim.Adam(ddp.parameters(), lr=1e-2)
        for s in range(3):
            x, y = batch(s)
            opt.zero_grad()
            loss_fn(ddp(dl.tensor(shard(x, r, n), device="cuda")),
                    dl.tensor(shard(y, r, n), device="cuda")).backward()
            opt.step()
        for p, w in zip(model.parameters(), want):
            assert np.allclose(p.numpy(), w, rtol=1e-4, atol=1e-4), np.abs(p.numpy() - w).max()


def main() -> None:
    suite, out = sys.argv[1], sys.argv[2]
    t0 = time.perf_counter()
    if suite == "collectives":
        collectives(sys.argv[3].split(","),
                    sys.argv[4].split(",") if len(sys.argv) > 4 else FLOATS)
        if dist.get_world_size() > 2:
            uneven_ddp()
    elif suite == "ddp":
        ddp_suite()
    elif suite == "timeout":
        timeout_suite()
    elif suite == "die":
        die_suite()
    elif suite == "nccl":
        nccl_suite()
    extra["seconds"] = time.perf_counter() - t0
    rank = dist.get_rank() if dist.is_initialized() else 0
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"checks": checks, **extra}, f, indent=1)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
