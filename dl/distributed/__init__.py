"""Collectives between processes with torch.distributed names: MPI (mpi4py) between CPU
processes, NCCL (CuPy) between GPUs. mpi4py and CuPy are imported only when used.

    import dl.distributed as dist
    dist.init_process_group("mpi")          # under `mpirun -n 2 python script.py`
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    w = dist.broadcast(t, src=0, async_op=True); w.wait()

See process_group.py (set-up, timeouts, checked mode), collectives.py (memory, 16-bit
floats, dl.capture), nccl_backend.py, sampler.py (DistributedSampler); data-parallel
training is dl.nn.parallel.DistributedDataParallel."""
from __future__ import annotations

from .collectives import (
    ReduceOp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    barrier,
    broadcast,
    reduce_scatter,
    reduce_scatter_tensor,
)
from .process_group import (
    Backend,
    destroy_process_group,
    get_backend,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    set_debug,
)
from .sampler import DistributedSampler

__all__ = ["Backend", "DistributedSampler", "ReduceOp", "Work", "all_gather",
           "all_gather_into_tensor", "all_reduce", "barrier", "broadcast",
           "destroy_process_group", "get_backend", "get_rank", "get_world_size",
           "init_process_group", "is_available", "is_initialized", "is_mpi_available",
           "is_nccl_available", "reduce_scatter", "reduce_scatter_tensor", "set_debug"]
