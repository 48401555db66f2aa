#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with -Werror, runs every ctest test.
# Usage: scripts/test.sh   (from anywhere; the build goes to build/ in the repo)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

BUILD=${SW_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DSW_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
cd "$BUILD"
ctest --output-on-failure -j2 --timeout 300
