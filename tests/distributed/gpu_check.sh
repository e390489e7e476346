#!/usr/bin/env bash
# The NCCL checks, on a machine with a CUDA GPU and CuPy (what CI without a GPU skips):
#   bash tests/distributed/gpu_check.sh
# With mpirun and mpi4py: the nccl worker under mpirun, one rank per GPU (up to 2); always: a
# world of one started without mpirun (no MPI needed).
set -uo pipefail
cd "$(dirname "$0")/../.."
python3 -c "import cupy; print('cupy', cupy.__version__, cupy.cuda.runtime.getDeviceCount(),
'GPU(s)')" || { echo "no CuPy/GPU: nothing to check"; exit 0; }
command -v mpirun >/dev/null || echo "no mpirun here: the one-process NCCL test only"
python3 -c "import mpi4py; print('mpi4py', mpi4py.__version__)" 2>/dev/null || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
python3 -m pytest -q -p no:cacheprovider -rs tests/distributed/test_distributed.py -k nccl "$@"
