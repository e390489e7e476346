#!/usr/bin/env bash
# Set up and run the whole test suite (what CI runs). CUBE_SLOW=1 runs the long fuzz tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m ruff check .
# every kernel of dl/kernels and dl's fused kernels through the real tools (a missing tool's
# target is skipped)
python3 -m cube.cli check --library
python3 -m pytest -q "$@"
