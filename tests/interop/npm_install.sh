#!/bin/sh
# npm_install.sh SRC_DIR DEST_DIR - the interop fixture (ctest interop_npm_install): installs
# tests/interop/package-lock.json (SkyWalking's Node.js agent, skywalking-backend-js) with
# `npm ci` into DEST_DIR (in the build tree; node_modules never goes into the source tree).
# Skipped when DEST_DIR already holds an install of the same lock file. Fails loudly when node,
# npm or the registry is missing: the interop test then does not run and ctest reports it.
set -u
SRC=$1 DEST=$2
command -v node >/dev/null 2>&1 || { echo "FAIL: node is not installed (scripts/deps.sh installs nodejs)"; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "FAIL: npm is not installed (scripts/deps.sh installs npm)"; exit 1; }
mkdir -p "$DEST" || exit 1
want=$(sha256sum <"$SRC/package-lock.json" | cut -d' ' -f1)
if [ -f "$DEST/node_modules/skywalking-backend-js/package.json" ] &&
    [ "$(cat "$DEST/.lock.sha256" 2>/dev/null)" = "$want" ]; then
    echo "interop: skywalking-backend-js already installed in $DEST"
    exit 0
fi
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/" || exit 1
rm -f "$DEST/.lock.sha256"
echo "interop: npm ci in $DEST (node $(node --version), npm $(npm --version))"
# No install scripts (husky is a dependency of the package; nothing here needs a script).
if ! (cd "$DEST" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund); then
    echo "FAIL: npm ci of skywalking-backend-js failed (is the npm registry reachable?)"
    exit 1
fi
[ -f "$DEST/node_modules/skywalking-backend-js/package.json" ] || { echo "FAIL: skywalking-backend-js missing after npm ci"; exit 1; }
echo "$want" >"$DEST/.lock.sha256"
echo "interop: installed skywalking-backend-js $(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$DEST/node_modules/skywalking-backend-js/package.json" | head -n 1)"
