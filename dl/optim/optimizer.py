"""`Optimizer` base: parameter groups, per-parameter state, zero_grad, and `_update`, which
writes a step's new values (lazy, fused) into the parameters and state tensors in one kernel."""
from __future__ import annotations

from cube import recording

from .. import dtypes
from ..autograd import no_grad
from ..fusion import materialise
from ..fusion.graph import Node
from ..tensor import Tensor


class Optimizer:
    def __init__(self, params, defaults: dict):
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = defaults
        self.param_groups = []
        for g in groups:
            g = {**defaults, **g, "params": list(g["params"])}
            g.setdefault("initial_lr", g["lr"])
            self.param_groups.append(g)
        self.state: dict[int, dict] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def _state(self, p: Tensor) -> dict:
        return self.state.setdefault(id(p), {})

    @staticmethod
    def _direct(*tensors) -> bool:
        """Whether a step can run as one library kernel (dl.kernels.optim) on these: one
        float32/float64 dtype, contiguous storage. Anything else takes the fused graph."""
        dt = tensors[0].dtype
        if dt not in (dtypes.float32, dtypes.float64):
            return False
        for t in tensors:
            if t.dtype is not dt or t.shape != tensors[0].shape:
                return False
            t._materialise()
            if not t.is_contiguous():
                return False
        return True

    @staticmethod
    def _update(pairs: list[tuple[Tensor, Tensor]]) -> None:
        """Write each new value (a lazy expression of the old ones) into its target, all in
        one fused kernel: every unit reads and writes only its own element."""
        targets, values = [], []
        for target, value in pairs:
            if value.shape != target.shape:
                value = value.expand(*target.shape)
            if value.dtype != target.dtype:
                value = value.to(target.dtype)
            if not value.is_lazy:  # keep the write in the one kernel
                value = Tensor._lazy(Node("identity", (value,), (value.dtype.compute,),
                                          value.dtype, value.shape), value.device)
            targets.append(target)
            values.append(value)
        materialise(values, targets)

    def step(self):
        # a step reads host state that changes from step to step (step counts, the learning
        # rate): under dl.capture it runs again at every replay instead of being frozen
        recording.hook(self._step_no_grad)

    def _step_no_grad(self):
        with no_grad():
            self._step()

    def _step(self):
        raise NotImplementedError

    def state_dict(self) -> dict:
        ids = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        return {"state": {ids[k]: dict(v) for k, v in self.state.items() if k in ids},
                "param_groups": [{k: v for k, v in g.items() if k != "params"}
                                 for g in self.param_groups]}
