"""Bad kernels. Each line marked `# ERROR: text` is where the CompileError must point, and
`text` must appear in its message. Collected by tests/cube/test_errors.py."""
# ruff: noqa
from cube import ABSOLUTE_POS, UNIT_POS, Array, Comptime, Line, cube, f16, f32, i32, u32
import cube as cb


def plain_python(x):
    return x + 1


@cube(launch=True)
def other_kernel(x: Array[f32]):
    pass


@cube(launch=True)
def e_lambda(x: Array[f32]):
    f = lambda v: v  # ERROR: lambda


@cube(launch=True)
def e_listcomp(x: Array[f32]):
    y = [v for v in range(3)]  # ERROR: list comprehensions


@cube(launch=True)
def e_try(x: Array[f32]):
    try:  # ERROR: try statements
        x[0] = 1.0
    except Exception:
        pass


@cube(launch=True)
def e_with(x: Array[f32]):
    with open("f"):  # ERROR: with statements
        pass


@cube(launch=True)
def e_class(x: Array[f32]):
    class A:  # ERROR: class definitions
        pass


@cube(launch=True)
def e_nested_def(x: Array[f32]):
    def g():  # ERROR: nested function definitions
        pass


@cube(launch=True)
def e_yield(x: Array[f32]):
    yield 1  # ERROR: yield


@cube(launch=True)
def e_starargs(x: Array[f32]):
    x[0] = max(*(1.0, 2.0))  # ERROR: star arguments


@cube(launch=True)
def e_fstring(x: Array[f32]):
    s = f"{ABSOLUTE_POS}"  # ERROR: f-strings


@cube(launch=True)
def e_unknown_name(x: Array[f32]):
    x[ABSOLUTE_POS] = undefined_thing  # ERROR: unknown name 'undefined_thing'


@cube(launch=True)
def e_mixed_sign(x: Array[i32], n: u32):
    x[0] = x[1] + n  # ERROR: cannot mix i32 and u32


@cube(launch=True)
def e_changes_type(x: Array[f32], y: Array[i32]):
    v = x[0]
    for i in range(4):
        v = y[i]  # ERROR: changes type from f32 to i32


@cube(launch=True)
def e_runtime_shared_size(x: Array[f32], n: u32):
    s = cb.SharedMemory(f32, n)  # ERROR: must be known at compile time


@cube(launch=True)
def e_runtime_unroll(x: Array[f32], n: u32):
    for i in cb.range(n, unroll=True):  # ERROR: unrolled range needs compile-time bounds
        x[i] = 0.0


@cube(launch=True)
def e_runtime_comptime(x: Array[f32], n: u32):
    k = cb.comptime(n * 2)  # ERROR: only known at run time


@cube(launch=True)
def e_sync_divergent(x: Array[f32]):
    if UNIT_POS < 16:
        cb.sync_cube()  # ERROR: sync_cube in divergent control flow


@cube(launch=True)
def e_float_literal_int(x: Array[i32]):
    x[0] = x[1] * 0.5  # ERROR: cannot combine the float literal


@cube(launch=True)
def e_int_truediv(x: Array[i32]):
    x[0] = x[1] / x[2]  # ERROR: use '//'


@cube(launch=True)
def e_return_value(x: Array[f32]):
    return x[0]  # ERROR: cannot return a value


@cube(launch=True)
def e_break_in_comptime_loop(x: Array[f32]):
    for v in (1, 2):
        if x[0] > 0.0:
            break  # ERROR: unrolled loop


@cube(launch=True)
def e_store_scalar(x: Array[f32], n: u32):
    n[0] = 1  # ERROR: only arrays


@cube(launch=True)
def e_call_kernel(x: Array[f32]):
    other_kernel(x)  # ERROR: kernels cannot be called from kernels


@cube(launch=True)
def e_python_fn(x: Array[f32]):
    x[0] = plain_python(x[1])  # ERROR: decorate it with @cube


@cube(launch=True)
def e_print(x: Array[f32]):
    print(x[0])  # ERROR: print is not supported


@cube(launch=True)
def e_runtime_lane(x: Array[Line[f32]], k: u32):
    v = x[0]
    x[1] = v[k]  # ERROR: lane index must be known at compile time


@cube(launch=True)
def e_is(x: Array[f32]):
    if x[0] is None:  # ERROR: no 'is'/'in'
        pass


@cube(launch=True)
def e_float_condition(x: Array[f32]):
    if x[0]:  # ERROR: condition must be bool
        x[1] = 1.0


@cube(launch=True)
def e_math_on_int(x: Array[i32]):
    x[0] = cb.sqrt(x[1])  # ERROR: sqrt needs a float


@cube(launch=True)
def e_store_type(x: Array[i32], y: Array[f32]):
    x[0] = y[0]  # ERROR: cannot store a f32 value into memory of i32


@cube(launch=True)
def e_bad_attr(x: Array[f32]):
    n = x.length()  # ERROR: has no attribute 'length'


@cube(launch=True)
def e_shape_on_array(x: Array[f32]):
    n = x.shape(0)  # ERROR: only defined on tensors


@cube(launch=True)
def e_atomic_on_value(x: Array[f32]):
    cb.atomic_add(x[0], 0, 1.0)  # ERROR: must be an array


@cube(launch=True)
def e_range_float(x: Array[f32]):
    for i in range(x[0]):  # ERROR: range bounds must be integers
        pass


@cube(launch=True)
def e_while_else(x: Array[f32]):
    while True:  # ERROR: while/else
        break
    else:
        pass


@cube(launch=True)
def e_unroll_break(x: Array[f32]):
    for i in cb.range(4, unroll=True):
        break  # ERROR: unrolled loop


@cube(launch=True)
def e_divergent_return_with_sync(x: Array[f32]):
    if UNIT_POS > 3:
        return  # ERROR: returning early would skip barriers
    cb.sync_cube()


@cube
def helper_recursive(v):
    return helper_recursive(v)  # ERROR: recursion is not supported


@cube(launch=True)
def e_recursion(x: Array[f32]):
    x[0] = helper_recursive(x[1])


@cube(launch=True)
def e_literal_range(x: Array[u32]):
    x[0] = x[1] + -1  # ERROR: does not fit in u32


@cube(launch=True)
def e_plane_no_feature(x: Array[f32]):
    x[0] = cb.plane_sum(x[1])  # ERROR: plane_sum


@cube(launch=True)
def e_atomic_f16(x: Array[f16]):
    cb.atomic_add(x, 0, 1.0)  # ERROR: atomic_add on f16 is not supported


@cube(launch=True)
def e_f64_unsupported(x: Array[f32]):
    x[0] = f32(cb.f64(x[1]) * 2.0)  # ERROR: f64 is not supported
