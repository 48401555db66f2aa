#!/bin/sh
# npm_install.sh SRC_DIR DEST_DIR - fixture of the validator tests (ctest validator_npm_install):
# installs tests/validator/package-lock.json (skywalking-backend-js with SkyWalking's generated
# schema code, @grpc/grpc-js, google-protobuf) with `npm ci` into DEST_DIR, in the build tree
# (node_modules never goes into the source tree). Skipped when DEST_DIR already holds an install
# of the same lock file. Fails loudly when node, npm or the npm registry is missing; the
# validator tests then do not run and ctest reports them as failed.
set -u
SRC=$1 DEST=$2
command -v node >/dev/null 2>&1 || { echo "FAIL: node is not installed (scripts/deps.sh installs nodejs)"; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "FAIL: npm is not installed (scripts/deps.sh installs npm)"; exit 1; }
mkdir -p "$DEST" || exit 1
want=$(cat "$SRC/package.json" "$SRC/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ -f "$DEST/node_modules/skywalking-backend-js/package.json" ] &&
    [ "$(cat "$DEST/.lock.sha256" 2>/dev/null)" = "$want" ]; then
    echo "validator: npm packages already installed in $DEST"
    exit 0
fi
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/" || exit 1
rm -f "$DEST/.lock.sha256"
echo "validator: npm ci in $DEST (node $(node --version), npm $(npm --version))"
# No install scripts: nothing needed here runs one (husky, a dependency of the package, would).
if ! (cd "$DEST" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund); then
    echo "FAIL: npm ci of tests/validator/package-lock.json failed (is the npm registry reachable?)"
    exit 1
fi
for m in skywalking-backend-js @grpc/grpc-js google-protobuf; do
    [ -f "$DEST/node_modules/$m/package.json" ] || { echo "FAIL: $m missing after npm ci"; exit 1; }
done
[ -f "$DEST/node_modules/skywalking-backend-js/lib/proto/language-agent/Tracing_grpc_pb.js" ] ||
    { echo "FAIL: skywalking-backend-js has no generated Tracing_grpc_pb.js"; exit 1; }
echo "$want" >"$DEST/.lock.sha256"
echo "validator: installed $(cd "$DEST" && node -e 'for (const m of ["skywalking-backend-js", "@grpc/grpc-js", "google-protobuf"]) process.stdout.write(m + "@" + require(m + "/package.json").version + " ")')"
