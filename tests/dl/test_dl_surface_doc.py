"""docs/dl.md's supported-surface section is what scripts/dl_surface.py generates now (run
`python scripts/dl_surface.py --write` after adding an op, a target name or a table entry),
and docs/torch_surface.txt names only things torch has."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("dl_surface", ROOT / "scripts" /
                                                  "dl_surface.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_dl_md_surface_is_up_to_date():
    s = _script()
    doc = s.DOC.read_text()
    assert s.BEGIN in doc and s.END in doc, "docs/dl.md lost the generated section's markers"
    assert s._splice(doc, s.render()) == doc, \
        "docs/dl.md is out of date: run `python scripts/dl_surface.py --write`"


def test_targets_are_torch_names():
    pytest.importorskip("torch")
    import torch
    import torch.distributed
    import torch.nn.utils.rnn
    import torch.optim.lr_scheduler
    import torch.utils.data
    roots = {"torch": torch, "Tensor": torch.Tensor, "nn": torch.nn,
             "nn.functional": torch.nn.functional, "nn.init": torch.nn.init,
             "nn.utils": torch.nn.utils, "optim": torch.optim,
             "optim.lr_scheduler": torch.optim.lr_scheduler, "utils.data": torch.utils.data,
             "distributed": torch.distributed}
    t = torch.zeros(1, requires_grad=True)
    bad = []
    for ns, items in _script().read_targets().items():
        for name, _ in items:
            obj = t if ns == "Tensor" else roots[ns]
            for part in name.split("."):
                try:
                    obj = getattr(obj, part)
                except Exception:  # noqa: BLE001  (t.H of a 1-D tensor raises)
                    obj = None if ns != "Tensor" else torch.Tensor
                    if not hasattr(torch.Tensor, part):
                        obj = None
                    break
            if obj is None and not (ns == "Tensor" and name in ("grad", "grad_fn")):
                bad.append(f"{ns}: {name}")
    assert not bad, f"docs/torch_surface.txt names what torch lacks: {bad}"
