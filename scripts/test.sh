#!/usr/bin/env bash
# Set up and run the whole test suite (what CI runs). CUBE_SLOW=1 runs the long fuzz tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m ruff check .
python3 -m pytest -q "$@"
