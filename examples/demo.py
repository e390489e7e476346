"""The README demo: write kernels in Python, launch them, check them, look at what we generate.

    python examples/demo.py [runtime]        (default: the best runtime that starts here)
"""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import gelu  # noqa: E402
import histogram  # noqa: E402
import matmul  # noqa: E402
import prefix_sum  # noqa: E402
import softmax  # noqa: E402
import train_digits  # noqa: E402

import cube as cb  # noqa: E402
from cube import Array, Line, f32  # noqa: E402
from cube.targets import targets_table  # noqa: E402


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def main() -> None:
    rt = cb.runtime(sys.argv[1] if len(sys.argv) > 1 else None)
    section("targets on this machine")
    for name, target, ok, why in targets_table():
        print(f"  {name:<7} {target:<7} {'yes' if ok else 'no '}  {why[:90]}")
    print(f"\nlaunching on: {rt.name} ({rt.device_id()[:60]})")

    section("fused GELU, lines of 4, 1M floats")
    n = 1 << 20
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    dx = rt.from_numpy(x)
    dy = rt.empty_like(dx)
    t0 = time.perf_counter()
    gelu.gelu_kernel.launch(rt, cube_count=(n // 4 // 256,), cube_dim=(256,),
                            inp=dx.lines(4), out=dy.lines(4))
    t1 = time.perf_counter()
    gelu.gelu_kernel.launch(rt, cube_count=(n // 4 // 256,), cube_dim=(256,),
                            inp=dx.lines(4), out=dy.lines(4))
    t2 = time.perf_counter()
    err = np.max(np.abs(dy.numpy() - gelu.reference(x)))
    print(f"  x[:4]       = {x[:4]}")
    print(f"  gelu(x)[:4] = {dy.numpy()[:4]}")
    print(f"  max |error| vs float64 NumPy: {err:.2e}")
    print(f"  first launch (compile + run): {(t1 - t0) * 1e3:.1f} ms, "
          f"cached launch: {(t2 - t1) * 1e3:.2f} ms")

    section("the same GELU kernel on every runtime that starts here")
    for name in cb.available_runtimes():
        other = cb.runtime(name)
        ox, oy = other.from_numpy(x), other.empty(n, np.float32)
        gelu.gelu_kernel.launch(other, cube_count=(n // 4 // 256,), cube_dim=(256,),
                                inp=ox.lines(4), out=oy.lines(4))
        other.sync()
        t = time.perf_counter()
        gelu.gelu_kernel.launch(other, cube_count=(n // 4 // 256,), cube_dim=(256,),
                                inp=ox.lines(4), out=oy.lines(4))
        other.sync()
        ms = (time.perf_counter() - t) * 1e3
        e = np.max(np.abs(oy.numpy() - gelu.reference(x)))
        print(f"  {name:<11} ({other.target:<6}) max |error| {e:.1e}, {ms:7.2f} ms")

    section("tensor ops (dl): broadcasting, a fused elementwise chain, matmul, autograd")
    import dl
    dl.manual_seed(1)
    a = dl.randn(64, 128, requires_grad=True, device=rt.name)
    w = dl.randn(128, 32, requires_grad=True, device=rt.name)
    b = dl.zeros(32, device=rt.name)
    with dl.count_kernels() as c:
        h = (a @ w + b).relu()
        loss = (h * h).mean()
        loss.backward()
    print(f"  loss {float(loss.numpy()):.4f}; |grad a| {np.abs(a.grad.numpy()).sum():.3f}; "
          f"{c.launches} kernel launches for forward + backward")

    section("row softmax (shared memory + sync_cube), 37 x 1000")
    print(f"  max |error| vs float64: {softmax.run(rt):.2e}")
    section("tiled matmul (comptime TILE=8), 67x53 @ 53x45")
    print(f"  max |error| vs float64: {matmul.run(rt):.2e}")
    section("histogram with atomics, 200k values")
    print(f"  {histogram.run(rt)} values binned; bins match np.bincount")
    section(f"cube-wide prefix sum (plane ops, plane size {rt.plane_size})")
    prefix_sum.run(rt)
    print("  matches np.cumsum per cube")

    section("dl: a small CNN on scikit-learn's 8x8 digits, 5 epochs on the CPU")
    model, losses, acc, seconds = train_digits.train(epochs=5, device="cpu", quiet=True)
    print(f"  {len(losses)} steps in {seconds:.1f} s (compiles included): loss "
          f"{losses[0]:.3f} -> {losses[-1]:.3f}, test accuracy {acc * 100:.1f}%")
    print("  (python examples/train_digits.py trains 15 epochs, saves and reloads the weights)")

    section("the IR of gelu_kernel for Array[Line[f32, 4]]")
    types = dict(inp=Array[Line[f32, 4]], out=Array[Line[f32, 4]])
    print(gelu.gelu_kernel.source(target="ir", **types))
    section("... and the LLVM IR we JIT for the CPU (excerpt)")
    llvm = gelu.gelu_kernel.source(target="llvm", **types).splitlines()
    body = [ln for ln in llvm if ln.strip()]
    print("\n".join(body[:40]))
    if len(body) > 40:
        print(f"  ... ({len(body) - 40} more lines: `cube dump examples/gelu.py:gelu_kernel "
              f"--target llvm --line-size inp=4 --line-size out=4`)")
    for target in ("cuda", "wgsl"):
        section(f"... the same kernel as {target} (excerpt; "
                f"`cube dump examples/gelu.py:gelu_kernel --target {target}`)")
        src = [ln for ln in gelu.gelu_kernel.source(target=target, **types).splitlines()
               if ln.strip()]
        head = next((i for i, ln in enumerate(src) if "cube_gelu_kernel" in ln
                     or "@compute" in ln), 0)
        body = next((i for i, ln in enumerate(src) if ln.strip().startswith("if (")), head)
        print("\n".join(src[head:head + 2] + ["    ..."] + src[body:body + 22]))


if __name__ == "__main__":
    main()
