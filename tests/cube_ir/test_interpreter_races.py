"""The reference interpreter refuses races between cubes: an element one cube stores and
another cube loads or stores in the same launch. Lockstep execution would hide them (every
cube reads before any writes), while on a device the cubes run in any order or at once; each
case below is judged against that rule written out in Python, not against the interpreter's
own bookkeeping."""
from __future__ import annotations

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, CUBE_POS, UNIT_POS, Array, Line, cube, f32, u32


@pytest.fixture(scope="module")
def rt():
    return cb.runtime("interp")


@cube(launch=True)
def same_element(out: Array[f32]):
    out[0] = f32(CUBE_POS)  # every cube stores element 0


@cube(launch=True)
def reads_neighbour(x: Array[f32], out: Array[f32]):
    i = ABSOLUTE_POS
    if i > 0 and i < out.len():
        out[i] = x[i] + out[i - 1]  # out[i - 1] is another unit's element


@cube(launch=True)
def shift_in_place(x: Array[f32]):
    i = ABSOLUTE_POS
    if i + 1 < x.len():
        x[i] = x[i + 1]  # x[i + 1] is the next unit's, which stores it


@cube(launch=True)
def scale_in_place(x: Array[f32]):
    i = ABSOLUTE_POS
    if i < x.len():
        x[i] = x[i] * 2.0  # each unit its own element


@cube(launch=True)
def count(h: Array[u32], x: Array[u32]):
    i = ABSOLUTE_POS
    if i < x.len():
        cb.atomic_add(h, x[i] % 4, 1)


@cube(launch=True)
def lines_then_scalars(v: Array[Line[f32]], s: Array[f32]):
    if CUBE_POS == 0:
        v[0] = Line[f32, 4](1.0)  # elements 0..3 of the storage
    else:
        s[3] = s[3] + 1.0  # element 3 again, through the other parameter


def _races(rt, kernel, cube_count, cube_dim, **args) -> bool:
    try:
        kernel.launch(rt, cube_count=cube_count, cube_dim=cube_dim, **args)
    except cb.LaunchError as e:
        assert "data race" in str(e)
        return True
    return False


def _cube_of(unit: int, dim: int) -> int:
    return unit // dim


def _racing_units(touches: dict[int, list[tuple[int, bool]]], dim: int) -> bool:
    """The rule in Python: an element stored by one cube and touched by another."""
    for acc in touches.values():
        cubes_storing = {_cube_of(u, dim) for u, store in acc if store}
        cubes = {_cube_of(u, dim) for u, _ in acc}
        if cubes_storing and len(cubes) > 1:
            return True
    return False


@pytest.mark.parametrize("dim, cubes", [(4, 1), (4, 2), (1, 4), (8, 3)])
def test_neighbour_reads_race_exactly_across_cubes(rt, dim, cubes):
    n = dim * cubes
    touches: dict[int, list] = {}
    for u in range(1, n):  # out[u] = x[u] + out[u - 1]
        touches.setdefault(u - 1, []).append((u, False))
        touches.setdefault(u, []).append((u, True))
    expect = _racing_units(touches, dim)
    x = rt.from_numpy(np.ones(n, np.float32))
    out = rt.from_numpy(np.zeros(n, np.float32))
    assert _races(rt, reads_neighbour, cubes, dim, x=x, out=out) == expect
    assert expect == (cubes > 1)


@pytest.mark.parametrize("dim, cubes", [(4, 1), (4, 3), (1, 2)])
def test_in_place_shift_races_across_cubes(rt, dim, cubes):
    n = dim * cubes
    touches: dict[int, list] = {}
    for u in range(n - 1):  # x[u] = x[u + 1]
        touches.setdefault(u + 1, []).append((u, False))
        touches.setdefault(u, []).append((u, True))
    x = rt.from_numpy(np.arange(n, dtype=np.float32))
    assert _races(rt, shift_in_place, cubes, dim, x=x) == _racing_units(touches, dim)


def test_two_cubes_storing_one_element_race_with_the_line(rt):
    out = rt.from_numpy(np.zeros(1, np.float32))
    with pytest.raises(cb.LaunchError) as e:
        same_element.launch(rt, cube_count=2, cube_dim=1, out=out)
    msg = str(e.value)
    assert "data race" in msg and "test_interpreter_races.py" in msg
    assert "out[0] = f32(CUBE_POS)" in msg  # the source line, located


def test_own_elements_and_atomics_do_not_race(rt):
    x = np.arange(40, dtype=np.float32)
    buf = rt.from_numpy(x)
    assert not _races(rt, scale_in_place, 5, 8, x=buf)
    np.testing.assert_array_equal(buf.numpy(), x * 2)
    v = np.arange(40, dtype=np.uint32)
    h = rt.from_numpy(np.zeros(4, np.uint32))
    assert not _races(rt, count, 5, 8, h=h, x=rt.from_numpy(v))
    np.testing.assert_array_equal(h.numpy(), np.bincount(v % 4, minlength=4))


def test_one_cube_alone_never_races(rt):
    out = rt.from_numpy(np.zeros(1, np.float32))
    same_element.launch(rt, cube_count=1, cube_dim=1, out=out)
    # units of one cube may share memory (they can synchronise): not a race here
    x = rt.from_numpy(np.ones(16, np.float32))
    o = rt.from_numpy(np.zeros(16, np.float32))
    assert not _races(rt, reads_neighbour, 1, 16, x=x, out=o)


def test_aliased_parameters_share_their_elements(rt):
    """One buffer passed twice (as lines and as scalars): cube 0 stores elements 0..3 as a
    line, cube 1 reads element 3 as a scalar: the same memory, so a race."""
    buf = rt.from_numpy(np.zeros(8, np.float32))
    assert _races(rt, lines_then_scalars, 2, 1, v=buf.lines(4), s=buf)
    other = rt.from_numpy(np.zeros(8, np.float32))
    assert not _races(rt, lines_then_scalars, 2, 1, v=buf.lines(4), s=other)


def test_unit_pos_only_kernels_are_untouched(rt):
    """A kernel whose cubes each redo the same work into their own row (UNIT_POS only)."""
    @cube(launch=True)
    def rows(out: Array[f32], w: u32):
        out[CUBE_POS * w + UNIT_POS] = f32(UNIT_POS)

    out = rt.from_numpy(np.zeros(12, np.float32))
    rows.launch(rt, cube_count=3, cube_dim=4, out=out, w=4)
    np.testing.assert_array_equal(out.numpy(), np.tile(np.arange(4, dtype=np.float32), 3))
