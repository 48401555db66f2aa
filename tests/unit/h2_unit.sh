#!/bin/sh
# agent_h2_unit: frames from python3-h2 (h2_vectors.py gen), test_h2 through the layer, the
# wires it wrote decoded by hpack's own decoder (h2_vectors.py check).
# Usage: h2_unit.sh TEST_H2 H2_VECTORS_PY
set -e
if ! /usr/bin/python3 -c 'import h2, hpack, hyperframe' 2>/dev/null; then
    echo "FAIL: python3-h2 is not installed (scripts/deps.sh installs it)" >&2
    exit 1
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
/usr/bin/python3 "$2" gen "$d"
"$1" "$d"
/usr/bin/python3 "$2" check "$d"
