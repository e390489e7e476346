"""The multi-tensor step of a parameter group (torch's foreach/fused optimisers): one launch
per (device, dtype, state bucket) and up to `max_segments` parameters, kept as a plan.

A plan is made at a group's first step and reused while nothing it was made of changed:
every step it checks, per parameter, that the parameter and its state still own the buffers
the launch holds and that the gradient fits (same dtype, shape and device, contiguous), puts
the gradients' buffers in their argument slots and refreshes the step's scalars. Anything
else (a gradient that appeared or vanished, new group flags, a lazy parameter) makes a new
plan. Parameters the kernels do not take (halves, strided views) are left to the
per-parameter path, as are all of a runtime that binds too few buffers for one segment."""
from __future__ import annotations

from ..kernels.optim_multi import Launch, Rule, max_segments


class Member:
    """One parameter in a plan: the parameter and its state tensors with the buffers the
    launch holds, its state dict, and what its gradient must be like (no gradient is kept:
    its memory returns to the pool between steps)."""
    __slots__ = ("p", "owned", "st", "dtype", "shape", "strides", "device")

    def __init__(self, p, tensors: tuple, st: dict):
        """tensors: the parameter, its gradient, its state, in the rule's buffer order."""
        self.p, self.st = p, st
        self.owned = tuple((t, t._buf) for k, t in enumerate(tensors) if k != 1)
        self.dtype, self.shape, self.strides, self.device = p.dtype, p.shape, p._strides, \
            p.device

    def grad(self):
        """The parameter's gradient if the plan's launch still fits it, else None."""
        g = self.p.grad
        if g is None or g.dtype is not self.dtype or g.shape != self.shape or \
                g.device is not self.device:
            return None
        if g._buf is None:
            g._materialise()
        if g._strides != self.strides and not g.is_contiguous():
            return None
        for t, b in self.owned:
            if t._buf is not b:
                return None
        return g


class GroupPlan:
    """A group's multi-tensor launches: per launch, its `Launch`, its members and the bucket
    they share (an optimiser's key for what must be equal within one launch, e.g. Adam's
    step count); `rest`: the parameters the per-parameter path steps."""

    def __init__(self, params: list, flags, chunks: list, rest: list, idle: list,
                 cacheable: bool):
        self.params, self.count = params, len(params)  # the group's list, as it was
        self.flags = flags
        self.chunks = chunks  # (Launch, [Member], bucket, [their state dicts])
        self.rest = rest
        self.idle = idle  # parameters that had no gradient: one that gets one re-plans
        self.cacheable = cacheable

    def grads(self) -> list | None:
        """The gradients per launch, or None where the plan no longer fits."""
        out = []
        for _, members, _, _ in self.chunks:
            gs = []
            for m in members:
                g = m.grad()
                if g is None:
                    return None
                gs.append(g)
            out.append(gs)
        for p in self.idle:
            if p.grad is not None:
                return None
        return out


def build(opt, group: dict, flags) -> GroupPlan:
    """A plan for the group's parameters with gradients: the optimiser's `_prepare(p,
    group)` makes a parameter's state and returns (st, state tensors, bucket)."""
    rule: Rule = opt._rule(group)
    buckets: dict = {}
    rest, idle, cacheable = [], [], True
    for p in group["params"]:
        if p.grad is None:
            idle.append(p)
            continue
        # the state is made only for a parameter this path takes (SGD's first momentum
        # step is told by its buffer's absence)
        if not opt._direct(p, p.grad) or max_segments(p.device.rt, rule) < 1:
            rest.append(p)
            continue
        st, state, bucket = opt._prepare(p, group)
        tensors = (p, p.grad, *state)
        if not opt._direct(*tensors):
            rest.append(p)
            continue
        buckets.setdefault((p.device, p.dtype, bucket), []).append(
            (Member(p, tensors, st), tensors))
    chunks = []
    for (dev, _, bucket), members in buckets.items():
        rt = dev.rt
        size = max_segments(rt, rule)
        kflags = opt._kernel_flags(group, bucket)
        cacheable = cacheable and opt._cacheable(bucket)
        for i in range(0, len(members), size):
            part = [m for m, _ in members[i:i + size]]
            chunks.append((Launch(rule, rt, [t for _, t in members[i:i + size]], kflags),
                           part, bucket, [m.st for m in part]))
    return GroupPlan(group["params"], flags, chunks, rest, idle, cacheable)


def step(opt, index: int, group: dict) -> list:
    """Run group `index`'s multi-tensor step; return the parameters left to the
    per-parameter path."""
    flags = opt._group_flags(group)
    plan = opt._plans.get(index)
    grads = None
    if plan is not None and plan.flags == flags and plan.params is group["params"] and \
            plan.count == len(plan.params):
        grads = plan.grads()
    if grads is None:
        plan = build(opt, group, flags)
        grads = plan.grads()
        if grads is None:  # pragma: no cover - a plan always fits what it was made of
            raise RuntimeError("a fresh optimiser plan does not fit its parameters")
    opt._plans[index] = plan if plan.cacheable else None
    for (launch, _, bucket, states), gs in zip(plan.chunks, grads):
        launch.run(gs, opt._advance(group, states))
        if opt._cacheable(bucket):  # a replay relaunches it with fresh scalars
            opt._planned(launch.kernel, lambda group=group, states=states:
                         opt._advance(group, states))
    return plan.rest
