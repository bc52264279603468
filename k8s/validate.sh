#!/usr/bin/env bash
# Validates the Kubernetes manifests offline; CI runs it, and so can anyone with Go.
#
#   1. installs pinned kustomize, kubeconform and kube-score with `go install` (cached);
#   2. fetches the Kubernetes OpenAPI document from the k8s.io/kubernetes module through the
#      Go module proxy (`go mod download`, no other network) and converts it with
#      k8s/schemagen into standalone, strict JSON Schemas;
#   3. renders every overlay (and the base) with `kustomize build`;
#   4. validates the output with `kubeconform -strict` against those schemas, so a
#      misspelled or unknown field fails;
#   5. proves step 4 can fail: misspelled copies of the rendered manifests must be rejected;
#   6. runs `kube-score` with the ignore list justified in k8s/README.md.
#
# Environment: K8S_TOOLS_DIR (default <repo>/.bin/k8s) holds the tools; GO (default go).
set -euo pipefail

KUSTOMIZE_VERSION=v5.8.2
KUBECONFORM_VERSION=v0.8.0
KUBE_SCORE_VERSION=v1.20.0
# The schemas come from this release's api/openapi-spec/swagger.json.
KUBERNETES_VERSION=v1.36.3

# kube-score checks switched off for every overlay; each is justified in k8s/README.md
# ("kube-score ignore list"). Per-object exceptions use the kube-score/ignore annotation.
KUBE_SCORE_IGNORE=(
  container-image-pull-policy
)
# Optional kube-score checks we hold ourselves to.
KUBE_SCORE_ENABLE=(
  container-seccomp-profile
  container-ports-check
)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
tools="${K8S_TOOLS_DIR:-$repo/.bin/k8s}"
GO="${GO:-go}"
start=$SECONDS

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

log() { printf '==> %s\n' "$*" >&2; }

# install NAME MODULE/PATH VERSION: go install into a directory named after the version, so
# a pinned binary that exists is reused and a version bump installs beside it.
install() {
  local name=$1 pkg=$2 version=$3
  local dir="$tools/$name@$version"
  if [[ ! -x "$dir/$name" ]]; then
    log "installing $name $version"
    mkdir -p "$dir"
    (cd "$work" && GOBIN="$dir" "$GO" install "$pkg@$version")
  fi
  printf '%s\n' "$dir/$name"
}

kustomize="$(install kustomize sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION")"
kubeconform="$(install kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION")"
kube_score="$(install kube-score github.com/zegl/kube-score/cmd/kube-score "$KUBE_SCORE_VERSION")"

# The k8s.io/kubernetes module has replace directives, so it cannot be a dependency; `go mod
# download` of the module zip works and leaves it read-only in the module cache.
log "fetching the OpenAPI document of Kubernetes $KUBERNETES_VERSION"
info="$(cd "$work" && "$GO" mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION")"
if grep -q '"Error"' <<<"$info"; then
  printf '%s\n' "$info" >&2
  exit 1
fi
moddir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
spec="$moddir/api/openapi-spec/swagger.json"
[[ -f "$spec" ]] || { echo "validate.sh: $spec not found" >&2; exit 1; }

log "generating strict standalone schemas"
schemas="$work/schemas"
(cd "$repo" && "$GO" run ./k8s/schemagen -spec "$spec" -out "$schemas")
schema_location="$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json"

# Custom resources (cert-manager's Certificate in prod) have hand-written strict schemas in
# k8s/crds/<group>/<kind>_<version>.json.
crd_location="$here/crds/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"

kubeconform_check() {
  "$kubeconform" -strict -summary -schema-location "$schema_location" -schema-location "$crd_location" "$@"
}

# Every directory under overlays/ is an overlay; the base is rendered too so that it stays
# valid on its own.
targets=("$here/base")
for d in "$here"/overlays/*/; do
  targets+=("${d%/}")
done
rendered=()
for t in "${targets[@]}"; do
  name="${t#"$here"/}"
  out="$work/${name//\//_}.yaml"
  log "kustomize build k8s/$name"
  "$kustomize" build "$t" >"$out"
  rendered+=("$out")
done

log "kubeconform -strict"
kubeconform_check "${rendered[@]}"

# Negative self-test: each substitution below introduces one typo a human could make; the
# mutated manifest must be rejected, otherwise the schemas are not strict and step 4 proves
# nothing.
log "negative self-test: misspelled fields must be rejected"
sample="${rendered[${#rendered[@]}-1]}"
mutations=(
  's/readOnlyRootFilesystem:/readOnlyRootFileSystem:/'  # container securityContext
  's/targetPort:/tagetPort:/'                            # Service port
  's/minReplicas:/minReplica:/'                          # HorizontalPodAutoscaler
  's/^  podSelector:/  podSelectr:/'                     # NetworkPolicy spec
  's/renewBefore:/renewBfore:/'                          # cert-manager Certificate (prod)
)
for m in "${mutations[@]}"; do
  bad="$work/mutated.yaml"
  sed "$m" "$sample" >"$bad"
  if cmp -s "$sample" "$bad"; then
    echo "validate.sh: self-test mutation '$m' changed nothing in $(basename "$sample")" >&2
    exit 1
  fi
  if out="$(kubeconform_check "$bad" 2>&1)"; then
    printf '%s\n' "$out" >&2
    echo "validate.sh: kubeconform accepted a manifest mutated with '$m'" >&2
    exit 1
  fi
  if ! grep -q "additional properties" <<<"$out"; then
    printf '%s\n' "$out" >&2
    echo "validate.sh: mutation '$m' was rejected, but not as an unknown field" >&2
    exit 1
  fi
done

score_args=(--exit-one-on-warning --kubernetes-version "${KUBERNETES_VERSION%.*}")
for t in "${KUBE_SCORE_IGNORE[@]}"; do score_args+=(--ignore-test "$t"); done
for t in "${KUBE_SCORE_ENABLE[@]}"; do score_args+=(--enable-optional-test "$t"); done
for i in "${!targets[@]}"; do
  [[ "${targets[$i]}" == "$here/base" ]] && continue
  log "kube-score k8s/${targets[$i]#"$here"/}"
  "$kube_score" score "${score_args[@]}" "${rendered[$i]}"
done

log "manifests valid ($((SECONDS - start))s)"
