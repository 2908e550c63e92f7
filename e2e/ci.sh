#!/usr/bin/env bash
# The e2e harness's CI steps, for .ci/run to call: install what it needs (apt), build the real
# components from their Go modules into the cache outside the clone (cold on a fresh machine:
# see e2e/README.md "Figures"), then `npm run e2e`. Non-interactive; fails (never skips) when
# something cannot be had, saying what.
#   e2e/ci.sh            install + build + run
#   e2e/ci.sh --build    install + build only (e.g. to warm the cache early)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[e2e-ci] %s\n' "$*" >&2; }
die() { printf '[e2e-ci] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces, iptables/nftables, mounts)"

# iproute2 (ip netns), util-linux (nsenter), iptables + nftables (kube-proxy's two modes),
# openssl (the run's CA), jq (build.sh), getent is in libc-bin (DNS checks from pods), curl (the
# pyspark sdists; the Spark scenario's REST calls), a Java 17 JDK (Spark runs on it; javac compiles the
# Spark scenario's job).
need=()
for pair in ip:iproute2 nsenter:util-linux iptables:iptables nft:nftables openssl:openssl jq:jq getent:libc-bin curl:curl javac:openjdk-17-jdk-headless; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
    die "apt-get install ${need[*]} failed"
fi
command -v go >/dev/null 2>&1 || die "go is not on PATH (Go >= 1.26 builds Kubernetes, etcd, CoreDNS and the process kubelet)"
[ -d node_modules ] || npm ci --no-audit --no-fund

start=$(date +%s)
say "building the components (cached in ${SPARK_EXEC_SVC_E2E_CACHE:-/var/cache/spark-exec-svc-e2e}; a cold build takes tens of minutes)"
e2e/build.sh >/dev/null
say "components ready after $(($(date +%s) - start)) s"
[ "${1:-}" = --build ] && exit 0

npm run e2e
