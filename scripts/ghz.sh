#!/usr/bin/env bash
# Install the pinned ghz (an independent gRPC load generator) into the project's tool dir when it
# is absent, then print its path.
#
#   scripts/ghz.sh         install if needed; print the ghz binary's path on stdout
#
# bench/ghz.py (the interleaved governed/proxy rounds, `python -m bench.ghz`) calls this script.
# ghz is built from source through the Go module proxy (`go install`); the build takes a minute
# or two the first time, later calls only compare the stamp file and return at once.
# Overrides: GHZ_VERSION (pin), CAPGATE_TOOLS_BIN (install dir, default ~/.cache/capgate/bin).
set -euo pipefail

GHZ_VERSION="${GHZ_VERSION:-v0.93.0}"
BIN_DIR="${CAPGATE_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/capgate/bin}"
GHZ="$BIN_DIR/ghz"
STAMP="$BIN_DIR/.ghz-version"

installed() {
  [[ -x "$GHZ" && -f "$STAMP" && "$(cat "$STAMP")" == "$GHZ_VERSION" ]]
}

install_ghz() {
  if ! command -v go >/dev/null 2>&1; then
    echo "scripts/ghz.sh: ghz $GHZ_VERSION is not in $BIN_DIR and 'go' is not on PATH;" \
      "install Go and run this script again" >&2
    exit 1
  fi
  mkdir -p "$BIN_DIR"
  echo "scripts/ghz.sh: building ghz $GHZ_VERSION with go install (first time only)" >&2
  local started=$SECONDS
  # Outside any go.mod (the tool dir has none), so no module of this repository is touched.
  (cd "$BIN_DIR" && CGO_ENABLED=0 GOBIN="$BIN_DIR" \
    go install -trimpath -ldflags "-s -w" "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION") >&2
  echo "$GHZ_VERSION" >"$STAMP"
  echo "scripts/ghz.sh: ghz $GHZ_VERSION installed in $((SECONDS - started))s" >&2
}

installed || install_ghz
echo "$GHZ"
