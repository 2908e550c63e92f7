#!/usr/bin/env bash
# Builds the e2e harness's binaries from their published Go modules (e2e/go/<component>/go.mod of
# ours requires them; nothing fetched is committed) into a cache OUTSIDE the clone, one directory per
# component, keyed by the upstream version and a hash of our module's files and the Go version:
#   ${SPARK_EXEC_SVC_E2E_CACHE:-/var/cache/spark-exec-svc-e2e}/<component>-<version>-<hash>/<binary>
# A directory that exists is complete (it is renamed into place after a successful build), so a
# second run builds nothing.
#
# Spark is one more kind of component (`spark`): for each line of e2e/spark/pyspark-sdists.txt, PyPI's
# pyspark source distribution (fetched from the URL PyPI's JSON API gives, checked against the pinned
# sha256) is kept in $CACHE/pyspark-sdist/, and its pyspark/jars and pyspark/bin (deps/ in the sdist)
# are extracted into $CACHE/spark-<version>-<hash>/ with the e2e's job compiled there against those
# jars (javac; e2e/spark/job, ours). <hash> covers the sdist's sha256, the job's sources and javac's
# version. Manifest keys: "spark-<version>".
#
# Usage: e2e/build.sh [--paths] [component ...]   components: nsforward etcd kube kubelet coredns adapter render spark kubectl (default: all)
#   (kubectl is also what `npm test`'s manifest tests use; .ci/run builds it before `npm test`)
#   --paths   build nothing; print the manifest and exit 1 if a binary is missing
#   --regen-kube-gomod   rewrite e2e/go/kube/go.mod's replace block from the tag's go.mod, then tidy
# The last line on stdout is a JSON manifest {"kube": "/…/kube", …}; progress goes to stderr.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
GO_DIR="$HERE/go"
CACHE=${SPARK_EXEC_SVC_E2E_CACHE:-/var/cache/spark-exec-svc-e2e}
ALL=(nsforward etcd kube kubelet coredns adapter render spark kubectl)
SPARK_DIR="$HERE/spark"

log() { printf '[e2e-build] %s\n' "$*" >&2; }
die() { printf '[e2e-build] error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "go is not on PATH (the e2e harness builds Kubernetes, etcd, CoreDNS and the process kubelet from Go modules; install Go >= 1.26)"
command -v jq >/dev/null 2>&1 || die "jq is not on PATH (apt-get install jq)"

# The upstream module whose version names each component's cache entry (the version itself lives
# in that component's go.mod only).
upstream_module() {
  case "$1" in
    kube) echo k8s.io/kubernetes ;;
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    coredns) echo github.com/coredns/coredns ;;
    kubelet) echo github.com/virtual-kubelet/virtual-kubelet ;;
    nsforward) echo golang.org/x/sys ;; # ours; keyed by the one module it needs
    adapter) echo knative.dev/eventing ;; # the ApiServerSource receive adapter (a `tool` of e2e/go/adapter)
    render) echo knative.dev/eventing ;; # ours: kustomize + the eventing reconciler's receive-adapter env (e2e/go/render)
    kubectl) echo k8s.io/kubectl ;; # upstream's kubectl main on the published module, its own go.mod (not e2e/go/kube's)
    spark) echo pyspark ;; # not a Go module: PyPI sdists, see spark_entries
    *) die "unknown component $1 (known: ${ALL[*]})" ;;
  esac
}
binary_name() { case "$1" in kubelet) echo process-kubelet ;; adapter) echo apiserver_receive_adapter ;; *) echo "$1" ;; esac; }

module_version() { # component -> version required by our go.mod
  local mod; mod=$(upstream_module "$1")
  (cd "$GO_DIR/$1" && go mod edit -json | jq -r --arg m "$mod" '.Require[] | select(.Path == $m) | .Version')
}

module_hash() { # component -> hash of our module's files + Go version
  (cd "$GO_DIR/$1" && { go env GOVERSION; find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-12)
}

entry_dir() { echo "$CACHE/$1-$(module_version "$1")-$(module_hash "$1")"; }

# The kube wrapper must replace every staging module the tag's go.mod requires at v0.0.0 (upstream
# replaces them with ./staging/… paths, which a dependency's go.mod cannot carry) with the published
# v0.<minor>.<patch> of the same release. The list is derived from the tag, never written by hand.
kube_expected_replaces() { # version -> "path path version" lines
  local version=$1 gomod staging
  gomod=$(cd "$GO_DIR/kube" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" | jq -r .GoMod)
  [ -f "$gomod" ] || die "could not download k8s.io/kubernetes@$version's go.mod"
  staging="v0.${version#v1.}"
  awk -v v="$staging" '$2 == "v0.0.0" && $1 ~ /^k8s\.io\// {print $1, $1, v}' "$gomod" | sort
}
kube_actual_replaces() {
  (cd "$GO_DIR/kube" && go mod edit -json | jq -r '(.Replace // [])[] | "\(.Old.Path) \(.New.Path) \(.New.Version)"' | sort)
}
check_kube_gomod() {
  local version; version=$(module_version kube)
  if ! diff <(kube_expected_replaces "$version") <(kube_actual_replaces) >&2; then
    die "e2e/go/kube/go.mod's replace block differs from what k8s.io/kubernetes@$version's go.mod requires (diff above: < expected, > actual); run e2e/build.sh --regen-kube-gomod"
  fi
}
regen_kube_gomod() {
  local version; version=$(module_version kube)
  [ -n "$version" ] || die "e2e/go/kube/go.mod requires no k8s.io/kubernetes version"
  local gomod; gomod=$(cd "$GO_DIR/kube" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" | jq -r .GoMod)
  (
    cd "$GO_DIR/kube"
    # go and godebug lines: only the main module's count, so copy the tag's.
    go mod edit -go="$(awk '$1 == "go" {print $2; exit}' "$gomod")"
    go mod edit -dropgodebug=default 2>/dev/null || true
    local gd; gd=$(awk '$1 == "godebug" && $2 ~ /=/ {print $2}' "$gomod")
    for g in $gd; do go mod edit -godebug="$g"; done
    for r in $(go mod edit -json | jq -r '(.Replace // [])[] | .Old.Path'); do go mod edit -dropreplace="$r"; done
    while read -r old new ver; do go mod edit -replace="$old=$new@$ver"; done < <(kube_expected_replaces "$version")
    go mod tidy
  )
  log "regenerated e2e/go/kube/go.mod from k8s.io/kubernetes@$version"
}

build_component() { # component destdir
  local comp=$1 dest=$2 version bin
  version=$(module_version "$comp")
  bin=$(binary_name "$comp")
  local tmp="$dest.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  local -a flags=(-trimpath)
  case "$comp" in
    kube)
      # As upstream's hack/lib/golang.sh builds the static control-plane binaries: CGO off, tags
      # selinux,notest, version stamped so /version and the emulation-version logic are sane.
      local minor=${version#v1.}; minor=${minor%%.*}
      flags+=(-tags selinux,notest -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor")
      (cd "$GO_DIR/kube" && CGO_ENABLED=0 go build "${flags[@]}" -o "$tmp/kube" .)
      for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do ln -s kube "$tmp/$c"; done
      ;;
    etcd)
      (cd "$GO_DIR/etcd" && CGO_ENABLED=0 go build "${flags[@]}" -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
      ;;
    coredns)
      (cd "$GO_DIR/coredns" && CGO_ENABLED=0 go build "${flags[@]}" -ldflags "-s -w" -o "$tmp/coredns" github.com/coredns/coredns)
      ;;
    adapter)
      # As Knative's release builds it (ko: static, CGO off); e2e/go/adapter requires only eventing,
      # so every dependency is at the version eventing's own go.mod selects.
      (cd "$GO_DIR/adapter" && CGO_ENABLED=0 go build "${flags[@]}" -ldflags "-s -w" -o "$tmp/$bin" knative.dev/eventing/cmd/apiserver_receive_adapter)
      ;;
    render)
      (cd "$GO_DIR/render" && CGO_ENABLED=0 go build "${flags[@]}" -ldflags "-s -w" -o "$tmp/$bin" .)
      # The ConfigMaps Knative Eventing installs (config-logging, config-observability) feed the
      # reconciler's K_LOGGING_CONFIG / K_OBSERVABILITY_CONFIG; taken from the same module version.
      local cfg; cfg=$(cd "$GO_DIR/render" && go list -m -f '{{.Dir}}' knative.dev/eventing)/config/core/configmaps
      cp "$cfg/logging.yaml" "$cfg/observability.yaml" "$tmp/"
      ;;
    kubectl)
      # Stamped as the release it belongs to (k8s.io/kubectl v0.X.Y is Kubernetes v1.X.Y), so
      # `kubectl version --client` says v1.X.Y as a released kubectl does.
      local kversion="v1.${version#v0.}" kminor=${version#v0.}; kminor=${kminor%%.*}
      (cd "$GO_DIR/kubectl" && CGO_ENABLED=0 go build "${flags[@]}" -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$kversion -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kminor" -o "$tmp/kubectl" .)
      ;;
    kubelet | nsforward)
      (cd "$GO_DIR/$comp" && CGO_ENABLED=0 go build "${flags[@]}" -ldflags "-s -w" -o "$tmp/$bin" .)
      ;;
  esac
  rm -rf "$dest"; mv "$tmp" "$dest"
}

# ---- Spark: pyspark sdists from PyPI -------------------------------------------------------------
spark_versions() { awk '!/^#/ && NF == 2 {print $1, $2}' "$SPARK_DIR/pyspark-sdists.txt"; }

spark_entry_dir() { # version sha256 -> cache entry
  local hash
  hash=$( { echo "$2"; javac -version 2>&1; find "$SPARK_DIR/job" -type f -name '*.java' -print0 | sort -z | xargs -0 sha256sum | sed "s| $SPARK_DIR/| |"; } | sha256sum | cut -c1-12)
  echo "$CACHE/spark-$1-$hash"
}

fetch_pyspark_sdist() { # version sha256 -> path of the verified sdist (complete or absent)
  local version=$1 sha=$2 dir="$CACHE/pyspark-sdist" url
  local file="$dir/pyspark-$version.tar.gz"
  if [ -f "$file" ]; then echo "$file"; return 0; fi
  mkdir -p "$dir"
  # PyPI's JSON API lists the release's files; its url may be relative to the API's own URL.
  url=$(curl -fsSL "https://pypi.org/pypi/pyspark/json" |
    jq -r --arg v "$version" --arg sha "$sha" '.releases[$v][]? | select(.packagetype == "sdist" and .digests.sha256 == $sha) | .url' | head -n 1)
  [ -n "$url" ] || die "PyPI lists no pyspark $version sdist with sha256 $sha"
  case "$url" in http*) ;; *) url=$(node -e 'console.log(new URL(process.argv[1], "https://pypi.org/pypi/pyspark/json").href)' "$url") ;; esac
  log "downloading pyspark $version from $url"
  curl -fsSL --retry 3 -o "$file.part.$$" "$url" || { rm -f "$file.part.$$"; die "download of $url failed"; }
  echo "$sha  $file.part.$$" | sha256sum -c --quiet >&2 || { rm -f "$file.part.$$"; die "pyspark $version: sha256 differs from the pinned $sha"; }
  mv "$file.part.$$" "$file"
  echo "$file"
}

build_spark() { # version sha256 destdir
  local version=$1 sha=$2 dest=$3 sdist
  command -v javac >/dev/null 2>&1 || die "javac is not on PATH (Java 17 JDK: the e2e compiles its Spark job)"
  command -v curl >/dev/null 2>&1 || die "curl is not on PATH"
  sdist=$(fetch_pyspark_sdist "$version" "$sha")
  local tmp="$dest.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  # deps/jars and deps/bin of the sdist are the wheel's pyspark/jars and pyspark/bin (setup.py's package_dir)
  tar -xzf "$sdist" -C "$tmp" --strip-components=2 "pyspark-$version/deps/jars" "pyspark-$version/deps/bin"
  [ -f "$tmp/jars/spark-kubernetes_2.12-$version.jar" ] || [ -f "$tmp/jars/spark-kubernetes_2.13-$version.jar" ] ||
    die "pyspark $version has no spark-kubernetes jar"
  mkdir -p "$tmp/job/classes"
  javac -nowarn -cp "$tmp/jars/*" -d "$tmp/job/classes" "$SPARK_DIR"/job/*.java
  (cd "$tmp/job/classes" && jar cf ../job.jar .)
  rm -rf "$dest"; mv "$tmp" "$dest"
}

mode=build
comps=()
for a in "$@"; do
  case "$a" in
    --paths) mode=paths ;;
    --regen-kube-gomod) regen_kube_gomod; exit 0 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) die "unknown option $a" ;;
    *) upstream_module "$a" >/dev/null; comps+=("$a") ;;
  esac
done
[ ${#comps[@]} -gt 0 ] || comps=("${ALL[@]}")

if [ "$mode" = build ]; then
  mkdir -p "$CACHE" || die "cannot create the build cache $CACHE (set SPARK_EXEC_SVC_E2E_CACHE to a writable directory)"
fi

manifest='{}'
missing=()
for comp in "${comps[@]}"; do
  if [ "$comp" = spark ]; then
    while read -r version sha; do
      dest=$(spark_entry_dir "$version" "$sha")
      if [ ! -f "$dest/job/job.jar" ]; then
        if [ "$mode" = paths ]; then
          missing+=("spark-$version")
        else
          log "building spark $version into $dest (a ~300-430 MB download when not cached)"
          start=$(date +%s)
          build_spark "$version" "$sha" "$dest"
          log "built spark $version in $(($(date +%s) - start)) s"
        fi
      fi
      manifest=$(jq -c --arg k "spark-$version" --arg v "$dest" '. + {($k): $v}' <<<"$manifest")
    done < <(spark_versions)
    continue
  fi
  dest=$(entry_dir "$comp")
  bin="$dest/$(binary_name "$comp")"
  if [ ! -x "$bin" ]; then
    if [ "$mode" = paths ]; then
      missing+=("$comp")
    else
      [ "$comp" = kube ] && check_kube_gomod
      log "building $comp $(module_version "$comp") into $dest (cold: kube takes tens of minutes on 2 cores)"
      start=$(date +%s)
      build_component "$comp" "$dest"
      log "built $comp in $(($(date +%s) - start)) s"
    fi
  fi
  manifest=$(jq -c --arg k "$comp" --arg v "$bin" '. + {($k): $v}' <<<"$manifest")
done
echo "$manifest"
if [ ${#missing[@]} -gt 0 ]; then
  log "not built yet: ${missing[*]} (run e2e/build.sh)"
  exit 1
fi
