#!/usr/bin/env bash
# Runs the Python and Node client suites against the real compactord binary (make test calls
# it). A suite whose toolchain is missing is skipped with a loud message, so a machine with
# only Go passes; with CI=true a missing toolchain fails instead. Nothing is downloaded here:
# the Node suite needs `npm ci` in clients/node first (.ci/run does it).
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
skip() {
  if [[ "${CI:-}" == true ]]; then
    echo "clients/test.sh: FAILED: $1 (CI=true: the client suites must run)" >&2
    status=1
  else
    echo "clients/test.sh: SKIPPED: $1" >&2
  fi
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export COMPACTORD_BIN="$tmp/compactord"
go build -o "$COMPACTORD_BIN" ./cmd/compactord || exit 1

# Debian's python3-grpcio lives beside /usr/bin/python3, which may not be the python3 first
# on PATH.
py=""
for c in "${PYTHON:-}" /usr/bin/python3 python3; do
  if [[ -n "$c" ]] && command -v "$c" >/dev/null && "$c" -c 'import grpc, google.protobuf, pytest' 2>/dev/null; then
    py="$c"
    break
  fi
done
if [[ -n "$py" ]]; then
  echo "clients/test.sh: Python client suite ($("$py" --version))" >&2
  (cd clients/python && "$py" -m pytest -q -p no:cacheprovider) || status=1
else
  skip "Python client suite: no python3 with grpcio, protobuf and pytest (apt-get install python3-grpcio python3-protobuf python3-pytest)"
fi

if ! command -v node >/dev/null; then
  skip "Node client suite: node not found (apt-get install nodejs npm)"
elif [[ ! -d clients/node/node_modules ]]; then
  skip "Node client suite: run 'npm ci' in clients/node first"
else
  echo "clients/test.sh: Node client suite (node $(node --version))" >&2
  (cd clients/node && node --test test/e2e.test.js test/client.test.js test/schema.test.js test/recall.test.js) || status=1
fi
exit $status
