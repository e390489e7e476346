"""Collectives between processes with torch.distributed names: MPI (mpi4py) between CPU
processes, NCCL (CuPy) between GPUs. mpi4py and CuPy are imported only when used."""
from __future__ import annotations

__all__: list[str] = []
