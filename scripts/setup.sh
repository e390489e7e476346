#!/usr/bin/env bash
# Everything the project needs on a fresh Debian machine with Python 3.11+.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
source scripts/apt-packages.sh
CUBE_APT_PACKAGES="${APT_PACKAGES[*]}" bash scripts/install-system-deps.sh
python3 -m pip install -q --disable-pip-version-check -e ".[test]" ${CUBE_EXTRA_PIP:-}
