#!/usr/bin/env bash
# Set up and run the demo: custom kernels launched, results checked, generated source shown.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 examples/demo.py "$@"
