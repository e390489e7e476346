"""`Optimizer` base: parameter groups, per-parameter state, zero_grad, and `_update`, which
writes a step's new values (lazy, fused) into the parameters and state tensors in one kernel."""
from __future__ import annotations

import warnings
from collections import defaultdict

from cube import recording

from .. import dtypes, ops
from ..autograd import no_grad
from ..autograd.zero_grad import zero_grads
from ..fusion import materialise
from ..fusion.graph import Node
from ..fusion.writes import before_writes
from ..tensor import Tensor
from . import foreach


class Optimizer:
    """Base class of the optimisers: parameter groups, per-parameter state, zero_grad.

    params: an iterable of parameters, or of dicts (parameter groups: {"params": [...],
    "lr": ...}) whose settings override `defaults`. Subclasses implement `_step_param`
    and the hooks of the multi-tensor step (`foreach.step`): with `foreach` (the default)
    one launch updates up to `optim_multi.max_segments` parameters of a group (those of one
    device, dtype and state bucket); with foreach=False each parameter's update is one
    kernel."""
    # the per-parameter state kept as Python numbers that a state_dict gives as float32 0-d
    # tensors, as PyTorch's
    _scalar_state = ("step",)

    def __init__(self, params, defaults: dict):
        if isinstance(params, Tensor):
            raise TypeError(f"params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got a {params.dtype.name} tensor (PyTorch "
                            f"raises too: wrap it in a list)")
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = defaults
        self.param_groups = []
        # per-parameter state keyed by the parameter itself, as PyTorch's (`opt.state[p]`,
        # an empty dict for a parameter without state; a tensor hashes by identity, so a
        # lookup never compares values)
        self.state: dict = defaultdict(dict)
        # while a step is being recorded: (kernel, scalars) per direct launch (`_planned`)
        self._plan: list | None = None
        self._plans: dict[int, foreach.GroupPlan | None] = {}  # per group: its launches
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict) -> None:
        """Adds a group ({"params": a parameter or an iterable of them, settings...}; the
        settings it leaves out are the constructor's), as PyTorch's: a lone parameter is the
        group's one parameter, a set is refused (its order changes between runs), and a
        parameter already in a group is a ValueError."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        ps = param_group["params"]
        if isinstance(ps, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        ps = [ps] if isinstance(ps, Tensor) else list(ps)
        for p in ps:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params "
                                f"is {type(p).__name__}")
        g = {**self.defaults, **param_group, "params": ps}
        ids = {id(p) for p in ps}
        if len(ids) < len(ps):
            warnings.warn("optimizer contains a parameter group with duplicate parameters "
                          "(PyTorch warns too: each copy is stepped)", stacklevel=2)
        if any(id(p) in ids for h in self.param_groups for p in h["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(g)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Sets every parameter's `.grad` to None, or with set_to_none=False zeroes the
        gradients in place, as PyTorch's."""
        zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)

    def _state(self, p: Tensor) -> dict:
        return self.state.setdefault(p, {})

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
        """Updates every parameter that has a `.grad` by one step of the rule (no grad
        recorded). Under `dl.capture` it re-runs at every replay, reading the current learning
        rates and step counts. No `closure` argument."""
        # a step reads host state that changes from step to step (step counts, the learning
        # rate): under dl.capture it runs again at every replay instead of being frozen, or,
        # when every parameter took its single-kernel path, only its kernels run again with
        # their scalar arguments refreshed (~30 us of Python a parameter less)
        recording.hook(self._step_no_grad, self._fast_replay)

    def _step_no_grad(self):
        self._plan = [] if recording.current() is not None else None
        # the parameters and their state (moments, momentum buffers) are overwritten: lazy
        # values and gradient closures that read them keep the values of before
        # (dl/fusion/writes.py)
        bufs = []
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None or p._buf is None:
                    continue
                bufs.append(p._buf)
                for v in self.state.get(p, {}).values():
                    if isinstance(v, Tensor) and v._buf is not None:
                        bufs.append(v._buf)
        before_writes(bufs)
        with no_grad():
            self._step()

    def _planned(self, kernel, scalars) -> None:
        """After a direct kernel launch: scalars() advances the parameter's state one step
        and returns the kernel's scalar arguments (by name) for it, at each replay."""
        if self._plan is not None:
            self._plan.append((kernel, scalars))

    def _fast_replay(self, launches):
        plan, self._plan = self._plan, None
        if not plan or len(plan) != len(launches.entries) or \
                any(e[1] is None for e in launches.entries):
            return None  # a parameter took the graph path: re-run the whole step
        items = []
        for (kernel, scalars), (fn, cc, cd, args) in zip(plan, launches.entries):
            pos = {n: i for i, n in enumerate(kernel.arg_names())}
            items.append((fn, cc, cd, args, pos, scalars))
        flags = self._flags()

        def replay():
            if self._flags() != flags:  # a setting the kernels were compiled for changed
                return self._step_no_grad()
            for fn, cc, cd, args, pos, scalars in items:
                for name, v in scalars().items():
                    args[pos[name]] = v
                fn(cc, cd, args)
        return replay

    def _flags(self) -> tuple:
        """The group settings the step kernels are specialised on (compile-time flags)."""
        return tuple((bool(g.get("weight_decay")), bool(g.get("maximize")),
                      bool(g.get("nesterov")), bool(g.get("momentum")))
                     for g in self.param_groups)

    def _step(self):
        for i, group in enumerate(self.param_groups):
            rest = group["params"] if group.get("foreach") is False else \
                foreach.step(self, i, group)
            for p in rest:
                if p.grad is not None:
                    self._step_param(group, p)

    def _step_param(self, group: dict, p: Tensor) -> None:
        """One parameter's step (its own kernel, or the fused graph)."""
        raise NotImplementedError

    # ---- hooks of the multi-tensor step (dl/optim/foreach.py) ---------------------------
    def _rule(self, group: dict):
        """The group's `optim_multi.Rule`."""
        raise NotImplementedError

    def _group_flags(self, group: dict) -> tuple:
        """What a group's plan is specialised on (its kernels' compile-time settings)."""
        raise NotImplementedError

    def _prepare(self, p: Tensor, group: dict):
        """p's state made if need be: (state dict, state tensors in the rule's order, the
        bucket p's launch is chosen by: parameters in one launch share its scalars)."""
        raise NotImplementedError

    def _kernel_flags(self, group: dict, bucket) -> dict:
        raise NotImplementedError

    def _advance(self, group: dict, states: list) -> dict:
        """Advance one launch's parameters' states a step; its scalar arguments."""
        raise NotImplementedError

    def _cacheable(self, bucket) -> bool:
        """Whether a launch of this bucket is the same at the next step (and a replay)."""
        return True

    def state_dict(self) -> dict:
        """{"state": per-parameter state by index, "param_groups": the groups' settings with
        their "params" as those indices}, as PyTorch's: the state's tensors are the
        optimiser's own (not copies), "step" (`_scalar_state`) a float32 0-d tensor."""
        index: dict = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {}
        for p, st in self.state.items():
            if id(p) in index:
                state[index[id(p)]] = {k: _scalar_tensor(v) if k in self._scalar_state
                                       else v for k, v in st.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Loads a `state_dict()` (of an optimiser of the same kind over parameters of the
        same shapes, in the same groups), as PyTorch's: the groups' settings and each
        parameter's state; tensors are cast to the parameter's dtype (floating ones) and
        device, and shared when they already match."""
        groups, saved = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        params = {i: p for g, s in zip(groups, saved) for i, p in zip(s["params"], g["params"])}
        state: dict = defaultdict(dict)
        for k, st in state_dict["state"].items():
            p = params.get(k)
            if p is None:
                continue
            state[p] = {name: _loaded(name, v, p) for name, v in st.items()}
        self.state = state
        self.param_groups = [{**{k: v for k, v in s.items() if k != "params"},
                              "params": g["params"]} for g, s in zip(groups, saved)]
        self._plans = {}  # launches made for the old state tensors


def _scalar_tensor(v):
    """A per-parameter scalar of the state (the step count, NAdam's mu_product) as PyTorch
    keeps it in a state_dict: a float32 0-d tensor (on the host)."""
    if isinstance(v, Tensor):
        return v
    return ops.tensor(float(v), dtype=dtypes.float32)


def _loaded(name: str, v, p: Tensor):
    """A loaded state value for parameter p: "step" as the count dl keeps (an int), a
    tensor on p's device (a floating one in p's dtype)."""
    if name == "step":
        return int(v.item()) if isinstance(v, Tensor) else int(v)
    if isinstance(v, Tensor):
        return v.to(device=p.device, dtype=p.dtype if v.dtype.is_float else None)._materialise()
    return v
