#!/usr/bin/env bash
# Install the pinned grpcurl into the project's tool dir when it is absent, then print its path.
#
#   scripts/grpcurl.sh         install if needed; print the grpcurl binary's path on stdout
#
# grpcurl is built from source through the Go module proxy (`go install`), the one route a clean
# CI machine has. The reflection tests (tests/gateway/test_reflection.py) call this script, so
# `make test` and .ci/run get grpcurl without a step of their own. The build takes a minute or
# two the first time; later calls only compare the stamp file and return at once.
# Overrides: GRPCURL_VERSION (pin), CAPGATE_TOOLS_BIN (install dir, default ~/.cache/capgate/bin).
set -euo pipefail

GRPCURL_VERSION="${GRPCURL_VERSION:-v1.9.3}"
# Outside the clone by default, so a fresh clone on the same machine (CI) reuses the build.
BIN_DIR="${CAPGATE_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/capgate/bin}"
GRPCURL="$BIN_DIR/grpcurl"
STAMP="$BIN_DIR/.grpcurl-version"

installed() {
  [[ -x "$GRPCURL" && -f "$STAMP" && "$(cat "$STAMP")" == "$GRPCURL_VERSION" ]]
}

install_grpcurl() {
  if ! command -v go >/dev/null 2>&1; then
    echo "scripts/grpcurl.sh: grpcurl $GRPCURL_VERSION is not in $BIN_DIR and 'go' is not on" \
      "PATH; install Go and run this script again" >&2
    exit 1
  fi
  mkdir -p "$BIN_DIR"
  echo "scripts/grpcurl.sh: building grpcurl $GRPCURL_VERSION with go install (first time only)" >&2
  local started=$SECONDS
  # Run outside any go.mod (the tool dir has none) so no module of this repository is touched.
  # CGO off: a static binary that does not depend on the build machine's libc.
  (cd "$BIN_DIR" && CGO_ENABLED=0 GOBIN="$BIN_DIR" \
    go install -trimpath -ldflags "-s -w -X main.version=$GRPCURL_VERSION" \
    "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION") >&2
  echo "$GRPCURL_VERSION" >"$STAMP"
  echo "scripts/grpcurl.sh: grpcurl $GRPCURL_VERSION installed in $((SECONDS - started))s" >&2
}

installed || install_grpcurl
echo "$GRPCURL"
