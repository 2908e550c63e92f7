#!/bin/sh
# One release: builds the function's image for linux/amd64 and linux/arm64 from the root
# Dockerfile, pushes it, pins knative/base/image.env to the pushed digest and writes the install
# manifest dist/install-<version>.yaml (what `kubectl apply -k knative/` would apply).
#
# Usage: scripts/release.sh <image repository> <version> [--platforms linux/amd64,linux/arm64]
#   e.g.  scripts/release.sh registry.example.com/team/spark-exec-svc 0.1.0
# Needs: a container engine with buildx (DOCKER, default docker) logged in to the registry, kubectl
# >= 1.27 (KUBECTL, default kubectl), and a "## [<version>]" section in CHANGELOG.md.
# Then: commit image.env and tag (`git tag -a v<version>`); attach dist/install-<version>.yaml.
set -eu
cd "$(dirname "$0")/.."

DOCKER=${DOCKER:-docker}
KUBECTL=${KUBECTL:-kubectl}
platforms=linux/amd64,linux/arm64

usage() { echo "usage: $0 <image repository> <version> [--platforms p1,p2]" >&2; exit 2; }
[ $# -ge 2 ] || usage
repository=$1 version=$2
shift 2
while [ $# -gt 0 ]; do
  case "$1" in
    --platforms) [ $# -ge 2 ] || usage; platforms=$2; shift ;;
    *) usage ;;
  esac
  shift
done
case "$repository" in
  *@* | *:*/* | '' | *[!a-z0-9._/:-]*) echo "error: '$repository' is not an image repository (lower case, no tag or digest)" >&2; exit 2 ;;
esac
case "${repository##*/}" in *:*) echo "error: '$repository' carries a tag; give the repository only" >&2; exit 2 ;; esac
if ! printf '%s\n' "$version" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$'; then
  echo "error: version '$version' is not semantic (1.2.3 or 1.2.3-rc.1)" >&2; exit 2
fi
if ! grep -Fq "## [$version]" CHANGELOG.md; then
  echo "error: CHANGELOG.md has no '## [$version]' section: write the release notes first" >&2; exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# The base images, pinned: the Dockerfile's default tags resolved to their digests now.
pin() {
  tag=$(sed -n "s/^ARG $1=//p" Dockerfile)
  [ -n "$tag" ] || { echo "error: no 'ARG $1=' in Dockerfile" >&2; exit 1; }
  digest=$("$DOCKER" buildx imagetools inspect "$tag" | sed -n 's/^Digest:[[:space:]]*\(sha256:[0-9a-f]\{64\}\)[[:space:]]*$/\1/p' | head -n 1)
  [ -n "$digest" ] || { echo "error: cannot resolve $tag to a digest" >&2; exit 1; }
  printf '%s@%s' "${tag%@*}" "$digest"
}
node_image=$(pin NODE_IMAGE)
runtime_image=$(pin RUNTIME_IMAGE)

echo "building $repository:$version for $platforms (revision $revision) on $runtime_image"
"$DOCKER" buildx build \
  --platform "$platforms" \
  --build-arg "NODE_IMAGE=$node_image" \
  --build-arg "RUNTIME_IMAGE=$runtime_image" \
  --build-arg "VERSION=$version" \
  --build-arg "REVISION=$revision" \
  --label "org.opencontainers.image.base.name=$runtime_image" \
  --tag "$repository:$version" \
  --label "org.opencontainers.image.title=spark-exec-svc" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.created=$created" \
  --label "org.opencontainers.image.licenses=Apache-2.0" \
  --metadata-file "$work/metadata.json" \
  --push \
  .

# buildx writes the pushed manifest list's digest as "containerimage.digest".
digest=$(tr -d '\n' <"$work/metadata.json" | sed -n 's/.*"containerimage\.digest"[[:space:]]*:[[:space:]]*"\(sha256:[0-9a-f]\{64\}\)".*/\1/p')
if [ -z "$digest" ]; then
  echo "error: no containerimage.digest in buildx's metadata file; image.env is unchanged" >&2; exit 1
fi

cat >knative/base/image.env <<EOF
# Written by scripts/release.sh $version on $created (revision $revision).
IMAGE=$repository@$digest
EOF
mkdir -p dist
"$KUBECTL" kustomize knative/ >"dist/install-$version.yaml.tmp"
mv "dist/install-$version.yaml.tmp" "dist/install-$version.yaml"
echo "pushed $repository@$digest"
echo "wrote knative/base/image.env and dist/install-$version.yaml"
echo "next: git commit knative/base/image.env && git tag -a v$version -m 'spark-exec-svc $version'"
