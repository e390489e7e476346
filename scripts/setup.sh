#!/usr/bin/env bash
# Everything the project needs on a fresh Debian machine with Python 3.11+.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
source scripts/apt-packages.sh
# dl.distributed: Open MPI's mpirun and headers (the mpi extra's mpi4py builds against them)
APT_PACKAGES+=(openmpi-bin libopenmpi-dev)
CUBE_APT_PACKAGES="${APT_PACKAGES[*]}" bash scripts/install-system-deps.sh
python3 -m pip install -q --disable-pip-version-check -e ".[test]" ${CUBE_EXTRA_PIP:-}
