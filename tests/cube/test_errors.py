"""The error corpus: every bad kernel gives a CompileError at the marked line, with the file,
line, column, the source line and a caret -- and no compiler traceback."""
import inspect
import re
import sys
import traceback
from pathlib import Path

import pytest

import cube as cb
from cube.frontend.translator import Target
from cube.kernel import CubeFunction
from runtimes.base import Features

sys.path.insert(0, str(Path(__file__).parent))
import error_corpus  # noqa: E402

NO_PLANES = Features(plane_ops=False, f64=False, atomic_types=frozenset({"i32", "u32", "f32"}))
CASES = {n: v for n, v in vars(error_corpus).items()
         if isinstance(v, CubeFunction) and n.startswith("e_")}


def _expected(fn):
    """The (line, text) of the `# ERROR:` marker in fn's source or the helpers it calls."""
    for obj in (fn, error_corpus.helper_recursive):
        lines, start = inspect.getsourcelines(obj.fn)
        for i, line in enumerate(lines):
            m = re.search(r"# ERROR: (.*)$", line)
            if m:
                if obj is fn or "recursion" in fn.__name__:
                    return start + i, m.group(1).strip()
    raise AssertionError(f"{fn.__name__} has no ERROR marker")


def _build(k):
    if k.__name__ in ("e_plane_no_feature", "e_atomic_f16", "e_f64_unsupported"):
        sig = k.signature_from_types()
        return k.build_ir(sig, Target("weak", 1, NO_PLANES))
    return k.ir()


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_is_located(name):
    k = CASES[name]
    line, text = _expected(k)
    with pytest.raises(cb.CompileError) as info:
        _build(k)
    e = info.value
    msg = str(e)
    assert text in msg, msg
    assert e.loc is not None, msg
    filename, got_line, col, src = e.loc
    assert Path(filename).name == "error_corpus.py"
    assert got_line == line, msg
    header = msg.splitlines()[0]
    assert header.startswith(f"{filename}:{line}:{col + 1}: error:"), header
    assert src.strip() in msg and "^" in msg.splitlines()[-1]


@pytest.mark.parametrize("name", ["e_unknown_name", "e_mixed_sign", "e_sync_divergent"])
def test_no_compiler_traceback_on_launch(name, interp):
    """Through launch, the traceback ends in launch(): no frames from the compiler."""
    import numpy as np
    k = CASES[name]
    args = {}
    for pname in k.signature().parameters:
        ann = k.annotations()[pname]
        if isinstance(ann, cb.lang.MemSpec):
            elem = ann.elem
            args[pname] = interp.from_numpy(np.zeros(8, elem.np))
        else:
            args[pname] = 1
    with pytest.raises(cb.CompileError) as info:
        k.launch(interp, cube_count=1, cube_dim=1, **args)
    frames = traceback.extract_tb(info.value.__traceback__)
    files = {Path(f.filename).parent.name for f in frames}
    assert not files & {"frontend", "cube_ir", "passes"}, frames
