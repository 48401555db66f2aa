#!/bin/sh
# pip_install.sh SRC_DIR DEST_DIR PYTHON - the interop fixture (ctest interop_pip_install):
# installs tests/interop/requirements-python.txt (SkyWalking's Python agent, apache-skywalking,
# and its dependencies, pinned with hashes) into a venv DEST_DIR/venv made by PYTHON (Debian's
# /usr/bin/python3 by default: what scripts/deps.sh installs with python3-venv, never the system
# site-packages). Wheels only (--only-binary :all:): no compiler run, no sdist of grpcio built
# for minutes. Skipped when DEST_DIR already holds an install of the same requirements by the
# same Python. Fails loudly when the Python, its venv module or PyPI is missing: the interop
# test then does not run and ctest reports it.
set -u
SRC=$1 DEST=$2 PY=$3
REQ=$SRC/requirements-python.txt
[ -x "$PY" ] || { echo "FAIL: $PY not found (scripts/deps.sh installs python3 and python3-venv)"; exit 1; }
mkdir -p "$DEST" || exit 1
want="$(sha256sum <"$REQ" | cut -d' ' -f1) $("$PY" -c 'import sys; print(sys.version.split()[0])')"
if [ -x "$DEST/venv/bin/python" ] && [ "$(cat "$DEST/.req.stamp" 2>/dev/null)" = "$want" ] &&
    "$DEST/venv/bin/python" -c 'import skywalking, grpc' 2>/dev/null; then
    echo "interop: apache-skywalking already installed in $DEST/venv"
    exit 0
fi
rm -rf "$DEST/venv" "$DEST/.req.stamp"
echo "interop: venv in $DEST/venv ($PY, Python $("$PY" -c 'import sys; print(sys.version.split()[0])'))"
if ! "$PY" -m venv "$DEST/venv"; then
    echo "FAIL: $PY -m venv failed (Debian: the python3-venv package; scripts/deps.sh installs it)"
    exit 1
fi
if ! timeout 300 "$DEST/venv/bin/python" -m pip install --quiet --no-input \
    --disable-pip-version-check --require-hashes --only-binary :all: -r "$REQ"; then
    echo "FAIL: pip install of $REQ failed (is PyPI reachable? are there wheels for this Python?)"
    exit 1
fi
"$DEST/venv/bin/python" -c 'import skywalking, grpc' ||
    { echo "FAIL: skywalking or grpc does not import after pip install"; exit 1; }
echo "$want" >"$DEST/.req.stamp"
echo "interop: installed $("$DEST/venv/bin/python" -m pip list --format=freeze 2>/dev/null |
    grep -i -e '^apache-skywalking==' -e '^grpcio==' | tr '\n' ' ')"
