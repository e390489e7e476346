"""Differential fuzzing of random dl programs against PyTorch (tests/dl/program_fuzz_support.py):
views of views, in-place writes through views, broadcasting with size-1 and size-0 dims,
dtype promotion, reductions with keepdim, lazily fused chains, `.numpy()` / `.item()`
mid-program and autograd (one or two backward calls) — dl must compute what torch computes.

Budget: CUBE_FUZZ_PROGRAMS programs (default 40, fixed seeds; 2000 with CUBE_SLOW=1), run
on the cpu runtime and on the interpreter. A seed in KNOWN_BUGS is a dl bug this fuzzer
found: it is xfailed with its description, and must still fail for that reason (strict)."""
from __future__ import annotations

import copy
import os
import warnings

import program_fuzz_support as S
import pytest

SLOW = bool(os.environ.get("CUBE_SLOW"))
PROGRAMS = int(os.environ.get("CUBE_FUZZ_PROGRAMS", 2000 if SLOW else 40))

# seed -> (one-line description, a substring of the finding it must raise)
KNOWN_BUGS: dict[int, tuple[str, str]] = {}
# seeds whose findings were fixed (regressions): each must now match torch
FIXED = {
    72: "a float64 gradient reached a float32 matmul's backward, which raised (the engine "
        "now casts each input's gradient to its dtype, as torch's)",
    243: "the same",
    154: "a float requiring grad written into a bool tensor (`b[None] = x`) made b a path "
         "for x's gradient (integer and bool results now record no gradient)",
    264: "add(bool, bool, alpha=2) gave int64 (alpha now takes the operands' result type)",
    347: "the same, through add_'s alpha",
    790: "`h.mT.mul_(c)`, h requiring grad and c a broadcast constant: the backward raised "
         "(c's unused gradient, summed back to c's shape, read the overwritten h)",
    1359: "the same, through a slice",
    822: "add(int32, bool, alpha=2) gave int64 (b * alpha promoted alone; now in the "
         "operands' result type)",
    958: "the same",
    1715: "`x[-1] = y` with y of shape (1,) into a 0-dim view raised (a value's leading "
          "size-1 dims are dropped first, as torch's)",
    1823: "the same, (1, 2) into a row of 2",
    2095: "a view taken while its base required no grad (`v = h.select(1, 2)`), the base "
          "then written in place by a value requiring grad: v kept no history, so its part "
          "of the loss was left out of the gradient (a view now takes its base's new history)",
    2422: "cat of int32 and a legacy empty (0,) float32 tensor gave int32 (the empty one's "
          "dtype promotes too, as torch's)",
    4255: "an in-place op on an empty expanded view (`x.expand(0, 3, 3).exp_()`) was refused "
          "as an overlapping write",
    4803: "minimum with a nan operand gave neither operand a gradient (torch: both), so a "
          "nan loss left finite leaf gradients",
    5015: "the same",
    7067: "`x[:] = x.select(1, 0)`, a broadcast source overlapping its destination: the "
          "reference was wrong, not dl (torch's overlap check misses an expanded source and "
          "copies over values already overwritten); the fuzzer's torch side now clones a "
          "source that shares its destination's storage",
}


def _run(seed, devices):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return S.run_program(seed, devices)


@pytest.fixture(scope="module")
def devices():
    return S.dl_devices()


@pytest.mark.parametrize("chunk", range(4))
def test_random_programs_match_torch(devices, chunk):
    bad, xfails = [], []
    for seed in range(chunk, PROGRAMS, 4):
        prog, findings, _soft = _run(seed, devices)
        if seed in KNOWN_BUGS:  # (with CUBE_FUZZ_PROGRAMS large enough)
            desc, match = KNOWN_BUGS[seed]
            assert any(match in f for f in findings), \
                f"seed {seed} no longer fails as known ({desc}): {findings[:2]}"
            xfails.append(f"{seed}: {desc}")
        elif findings:
            bad.append(f"{prog.describe()}\n" + "\n".join(findings[:3]))
    assert not bad, "\n\n".join(bad)
    if xfails:
        pytest.xfail("; ".join(xfails))


@pytest.mark.parametrize("seed", sorted(FIXED))
def test_fixed_findings_stay_fixed(devices, seed):
    _, findings, _ = _run(seed, devices)
    assert not findings, f"seed {seed} ({FIXED[seed]}) fails again: {findings[:3]}"


@pytest.mark.parametrize("seed", sorted(KNOWN_BUGS))
def test_known_bugs_still_fail(seed):
    desc, match = KNOWN_BUGS[seed]
    _, findings, _ = _run(seed, ("cpu",))
    assert any(match in f for f in findings), \
        f"seed {seed} no longer fails as known ({desc}): {findings[:2]}"
    pytest.xfail(desc)


def test_comparison_catches_a_wrong_op():
    """The harness is not vacuous: dl's `sub` swapped for `add` in a copy of the table is
    reported on the programs that use it."""
    dl_ops = copy.copy(S.OPS)
    dl_ops["sub"] = S.Op(lambda B, ts, p: ts[0] + ts[1], 2, S.OPS["sub"].gen)
    caught = used = 0
    for seed in range(60):
        prog = S.generate(seed)
        if not any(s.ok and s.name == "sub" for s in prog.steps):
            continue
        used += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, findings, _ = S.run_program(seed, ("cpu",), dl_ops=dl_ops)
        caught += bool(findings)
    assert used >= 3 and caught >= used - 1, (used, caught)
