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
def e_comptime_of_a_name_a_runtime_if_assigns(x: Array[f32]):
    if ABSOLUTE_POS < len(x):
        t0 = cb.comptime(0)  # one variable for every path through the if: runtime
        for _ in cb.range(3, unroll=True):
            g = cb.comptime(3 - t0)  # ERROR: 't0' is a runtime variable: the runtime if at line
            t0 = t0 + g


@cube(launch=True)
def e_attribute_of_a_name_a_runtime_loop_assigns(x: Array[f32], n: u32):
    for i in range(n):
        k = 3
        x[i] = f32(k.bit_length())  # ERROR: 'k' is a runtime variable: the runtime for loop at line


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
    t = (1, 2)
    t[0] = 1  # ERROR: only arrays


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
def e_runtime_lane(x: Array[Line[f32, 4]], k: u32):
    v = x[0]
    x[1] = v[4]  # ERROR: lane 4 is out of range for a line of 4


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
def e_float_dimension(t: cb.Tensor[f32], x: Array[f32]):
    n = t.shape(x[0])  # ERROR: a dimension must be an integer


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


# ---- definite assignment: a read of a name not bound on every path -----------------------


@cube(launch=True)
def e_unbound_one_branch(x: Array[f32]):
    i = ABSOLUTE_POS
    if x[i] > 0.0:
        y = x[i]
    x[i] = y  # ERROR: 'y' may be unassigned here


@cube(launch=True)
def e_unbound_zero_trip_loop(x: Array[f32], n: u32):
    for k in range(n):
        last = x[k]
    x[0] = last  # ERROR: 'last' may be unassigned here


@cube(launch=True)
def e_unbound_while(x: Array[f32]):
    i = ABSOLUTE_POS
    while i < x.len():
        v = x[i]
        i += 64
    x[0] = v  # ERROR: 'v' may be unassigned here


@cube(launch=True)
def e_unbound_break_path(x: Array[f32]):
    for k in range(4):
        if x[k] > 0.0:
            break
        z = x[k]
    x[0] = z  # ERROR: may be unassigned


@cube(launch=True)
def e_read_before_assign(x: Array[f32]):
    x[0] = SCALE  # ERROR: 'SCALE' is read before it is assigned
    SCALE = 2.0


@cube(launch=True)
def e_loop_counter_after_loop(x: Array[f32], n: u32):
    for k in range(n):
        x[k] = 1.0
    x[0] = f32(k)  # ERROR: loop's counter


@cube(launch=True)
def e_unbound_in_loop_first_iteration(x: Array[f32], n: u32):
    for k in range(n):
        if k > 0:
            x[k] = prev  # ERROR: 'prev' may be unassigned
        prev = x[k]


@cube
def helper_partial_return(v):
    if v > 0.0:
        return v * 2.0


@cube(launch=True)
def e_helper_falls_off_end(x: Array[f32]):
    x[0] = helper_partial_return(x[1])  # ERROR: returns a value on some paths


# ---- values that Python's operators must not fold ---------------------------------------


@cube(launch=True)
def e_array_in_arithmetic(x: Array[f32]):
    x[0] = x + 1.0  # ERROR: the array `x`


@cube(launch=True)
def e_method_not_called(t: cb.Tensor[f32]):
    n = t.shape * 2  # ERROR: call it: `t.shape(0)`


@cube(launch=True)
def e_plane_sum_of_array(x: Array[f32]):
    x[0] = cb.plane_sum(x)  # ERROR: plane_sum takes a value, got the array `x`


@cube(launch=True)
def e_helper_as_condition(x: Array[f32]):
    if plain_python:  # ERROR: a condition must be a value, got the function `plain_python`
        x[0] = 1.0


CONFIG = {"tile": 4}


@cube(launch=True)
def e_dict_global(x: Array[f32]):
    x[0] = f32(CONFIG["tile"])  # ERROR: a dict object cannot be indexed


@cube(launch=True)
def e_module_missing_attr(x: Array[f32]):
    x[0] = cb.NOT_A_NAME  # ERROR: the module `cube` has no attribute 'NOT_A_NAME'


@cube(launch=True)
def e_array_chosen_at_runtime(x: Array[f32], y: Array[f32]):
    i = ABSOLUTE_POS
    if x[i] > 0.0:
        src = x
    else:
        src = y
    x[i] = src[i]  # ERROR: 'src' holds different compile-time values


@cube(launch=True)
def e_array_rebound_in_loop(x: Array[f32], y: Array[f32], n: u32):
    src = x
    for k in range(n):  # ERROR: 'src' is the array `y` inside this runtime loop
        x[k] = src[k]
        src = y


# ---- tuple indices (frontend/indexing.py) ----------------------------------------------

@cube(launch=True)
def e_tuple_index_count(t: cb.Tensor[f32]):
    t[0, 1, 2] = 1.0  # ERROR: index it with


@cube(launch=True)
def e_tuple_index_array(x: Array[f32]):
    x[0, 1] = 1.0  # ERROR: takes one linear index


@cube(launch=True)
def e_tuple_index_past_size(x: Array[f32]):
    s = cb.SharedMemory(f32, (4, 4))
    s[1, 4] = 1.0  # ERROR: index 4 is out of range for dimension 1
    x[0] = s[1, 3]


@cube(launch=True)
def e_tuple_index_negative(t: cb.Tensor[f32]):
    t[0, -1] = 1.0  # ERROR: is negative


@cube(launch=True)
def e_len_of_two_sizes(x: Array[f32]):
    s = cb.SharedMemory(f32, (4, 4))
    x[0] = f32(len(s))  # ERROR: write shape(d) for a size


@cube(launch=True)
def e_shape_subscript_past_rank(t: cb.Tensor[f32]):
    t[0] = f32(t.shape[3])  # ERROR: out of range for a rank


@cube(launch=True)
def e_alloc_zero_size(x: Array[f32]):
    s = cb.LocalArray(f32, (4, 0))  # ERROR: positive integer or a tuple
    x[0] = s[0, 0]


@cube(launch=True)
def e_tuple_index_line_tensor(t: cb.Tensor[Line[f32, 4]]):
    t[0, 0] = t[0, 1]  # ERROR: holds lines


# ---- found by the mutation fuzzer (tests/cube/test_fuzz_mutations.py) -------------------

@cube(launch=True)
def e_method_keyword(x: Array[f32]):
    if UNIT_POS < x.len(bogus=1):  # ERROR: takes no keyword arguments
        x[0] = 1.0


@cube
def helper_none_or_value(v):
    if v > 1.0:
        return None
    return v


@cube(launch=True)
def e_helper_none_and_value(x: Array[f32]):
    x[0] = helper_none_or_value(x[1]) * 2.0  # ERROR: but None at line


@cube(launch=True)
def e_yield_after_return(x: Array[f32]):
    x[0] = 1.0
    return
    yield 1  # ERROR: yield is not supported


@cube(launch=True)
def e_range_tuple_bound(x: Array[f32]):
    for k in range((1, 2)):  # ERROR: range bounds must be integers
        x[0] = 1.0


@cube(launch=True)
def e_huge_unroll(x: Array[f32]):
    for k in cb.range(0, 2 ** 31, 1, unroll=True):  # ERROR: unrolls 2147483648 iterations
        x[0] = 1.0
