#!/usr/bin/env bash
# Installs the Debian 12 packages swagent needs to build, test and run its demo (Java and
# Maven: scripts/oap.sh runs a real SkyWalking OAP from Maven Central's jars).
# Idempotent: does nothing when everything is already installed. Needs root (or sudo).
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git ca-certificates
  libgrpc-dev libprotobuf-c-dev protobuf-c-compiler libzstd-dev libunwind-dev
  libdeflate-dev zlib1g-dev libjson-c-dev
  libssl-dev # collector-stub: SHA-512 of CDS answer UUIDs (OAP's rule)
  libdw-dev # the reporter symbolises profile samples with libdwfl (docs/profiling.md)
  clang libclang-rt-14-dev
  nginx curl python3 jq wrk valgrind procps iproute2 openssl
  libssl-dev wget # HTTPS tests: tls_nb_client links libssl; wget is the GnuTLS client (git too)
  gnuplot-nox
  nodejs
  python3-venv
  default-jre-headless maven
  python3-grpcio # oap_cds: tests/oap/dcs_server.py, the OAP's dynamic configuration server
  # issue 36 tests (tests/e2e/mariadb.sh, lemp.sh): MariaDB, its client, PyMySQL, PHP-FPM with PDO
  mariadb-server mariadb-client python3-pymysql php-fpm php-cli php-mysql
  php-redis # lemp.sh: the PHP page's Redis calls (php-redis, next to PDO's MariaDB)
  # database and cache tests (tests/db/): servers and clients of Redis, PostgreSQL, memcached
  redis-server redis-tools python3-redis postgresql-15 postgresql-client-15 python3-psycopg2
  memcached python3-pymemcache
  # HTTP/2 (issue 37): python3-h2 makes the frames of agent_h2_unit and serves h2c upgrades
  # (tests/h2/); nghttpd, nghttp and h2load (bench/h2.sh too); grpc core for the gRPC tests
  python3-h2 nghttp2-client nghttp2-server python3-grpcio
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm for the interop test (SkyWalking's Node.js agent); a NodeSource nodejs bundles its own.
# python3-venv for the other (SkyWalking's Python agent, pip-installed into a venv of Debian's
# /usr/bin/python3 in the build tree: tests/interop/pip_install.sh).
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "swagent: installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
# nginx's package may start a system nginx on port 80; the tests and the demo never use it.
