#!/usr/bin/env bash
# Install the pinned helm into the project's tool dir when it is absent, then print its path.
#
#   scripts/helm.sh            install if needed; print the helm binary's path on stdout
#   scripts/helm.sh lint       install if needed; helm lint --strict with every helm/capgate/ci/*.yaml
#
# The binary lands in ~/.cache/capgate/bin/helm (outside the clone, shared by every clone on the
# machine; not put on PATH). When absent there, a helm on PATH that reports exactly the pinned
# version is linked in instead of building. Otherwise helm is built from source through the Go
# module proxy (`go install`), the one route a clean CI machine has: no package registry ships a
# prebuilt helm binary (DESIGN §12: "helm pinned and built only when absent"). The build takes
# minutes the first time (README: first-run times); later calls compare the stamp and return.
# Overrides: HELM_VERSION (pin), CAPGATE_TOOLS_BIN (install dir, default ~/.cache/capgate/bin).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HELM_VERSION="${HELM_VERSION:-v3.21.4}"
# Outside the clone by default, so a fresh clone on the same machine (CI) reuses the build.
BIN_DIR="${CAPGATE_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/capgate/bin}"
HELM="$BIN_DIR/helm"
STAMP="$BIN_DIR/.helm-version"

installed() {
  [[ -x "$HELM" && -f "$STAMP" && "$(cat "$STAMP")" == "$HELM_VERSION" ]]
}

# A release build of the pinned version already on PATH (and not our own link) will do.
link_from_path() {
  local found
  found="$(command -v helm 2>/dev/null)" || return 1
  [[ "$found" != "$HELM" ]] || return 1
  [[ "$("$found" version --template '{{.Version}}' 2>/dev/null)" == "$HELM_VERSION" ]] || return 1
  mkdir -p "$BIN_DIR"
  ln -sf "$found" "$HELM"
  echo "$HELM_VERSION" >"$STAMP"
  echo "scripts/helm.sh: using helm $HELM_VERSION from PATH ($found)" >&2
}

install_helm() {
  if ! command -v go >/dev/null 2>&1; then
    echo "scripts/helm.sh: helm $HELM_VERSION is not in $BIN_DIR and 'go' is not on PATH;" \
      "install Go >= 1.26 (helm $HELM_VERSION needs it) and run this script again" >&2
    exit 1
  fi
  mkdir -p "$BIN_DIR"
  # The tool dir is local to each machine: keep it out of git without touching .gitignore.
  [[ ! -d "$ROOT/.tools" || -f "$ROOT/.tools/.gitignore" ]] || printf '*\n' >"$ROOT/.tools/.gitignore"
  echo "scripts/helm.sh: building helm $HELM_VERSION with go install (first time only)" >&2
  local started=$SECONDS
  # The release build's link flags (helm's Makefile): without them `helm version` says "v3.21"
  # and template/lint assume Kubernetes 1.20, which fails the chart's kubeVersion constraint.
  # The Kubernetes version is that of the client-go module this helm release builds with.
  local gomod k8s_minor
  # Run outside any go.mod (the tool dir has none) so no module of this repository is touched.
  gomod="$(cd "$BIN_DIR" && go mod download -json "helm.sh/helm/v3@$HELM_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  k8s_minor="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod" | head -n1)"
  if [[ -z "$k8s_minor" ]]; then
    echo "scripts/helm.sh: cannot read the k8s.io/client-go version from $gomod" >&2
    exit 1
  fi
  local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  local pkg
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  # CGO off: a static binary that does not depend on the build machine's libc. `-s -w` drop the
  # symbol table and DWARF at link time; `-dwarf=false` saves the compiler generating DWARF
  # that would be dropped (measured from an empty build cache on 2 cores: 146 s of CPU instead
  # of 172 s). Go already compiles GOMAXPROCS packages at once, so -p needs no setting.
  (cd "$BIN_DIR" && CGO_ENABLED=0 GOBIN="$BIN_DIR" \
    go install -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") >&2
  echo "$HELM_VERSION" >"$STAMP"
  echo "scripts/helm.sh: helm $HELM_VERSION installed in $((SECONDS - started))s" >&2
}

installed || link_from_path || install_helm

case "${1:-path}" in
  path)
    echo "$HELM"
    ;;
  lint)
    chart="$ROOT/helm/capgate"
    shopt -s nullglob
    values=("$chart"/ci/*.yaml)
    if ((${#values[@]} == 0)); then
      echo "scripts/helm.sh: no values files in $chart/ci" >&2
      exit 1
    fi
    for file in "${values[@]}"; do
      echo "helm lint --strict ${chart#"$ROOT"/} -f ${file#"$ROOT"/}"
      "$HELM" lint --strict --quiet "$chart" -f "$file"
    done
    ;;
  *)
    echo "usage: scripts/helm.sh [path|lint]" >&2
    exit 2
    ;;
esac
