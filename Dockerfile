# syntax=docker/dockerfile:1
# Image of the executor-service function (knative/base/service.yaml, func deploy).
#   docker build -t registry.example.com/team/spark-exec-svc:0.1.0 .
#
# The function ships as ONE bundled file (rolldown, `npm run bundle` = scripts/bundle.ts):
# dist/main.cjs (minified CommonJS), the loader dist/start.cjs that the container starts, and
# main.cjs.cache, a V8 code cache of main.cjs taken after its module top level ran. No
# node_modules at run time. test/behaviour/bundle.test.ts and the bench's cold start build it with the same
# script and run it from a directory without node_modules (docs/performance.md).
#
# Build stage: Debian slim, not Alpine. `npm ci` installs the devDependency `node` (the repo's
# pinned Node 22, whose preinstall fetches a glibc binary) and rolldown's native binding.
# Runtime stage: distroless Node 22 (Debian 12): node and its libraries only, no npm, no shell, no
# package manager; user 65532 (`nonroot`) exists there.
# Base images: scripts/release.sh resolves both tags to digests at release time and passes
# NODE_IMAGE=node:22-slim@sha256:… and RUNTIME_IMAGE=…@sha256:… (recorded in the image's
# org.opencontainers.image.base.* labels); a plain `docker build` uses the tags below.
ARG NODE_IMAGE=node:22-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs22-debian12:nonroot

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts ./scripts
COPY shared ./shared
COPY functions ./functions
RUN npm run bundle

FROM ${RUNTIME_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="spark-exec-svc" \
      org.opencontainers.image.description="Knative function: one driver-owned Kubernetes Service per Apache Spark executor" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/dist/main.cjs /app/dist/start.cjs ./
# The code cache again, with THIS image's node: V8 accepts a cache only from the same V8 version
# and flags, and the build stage's `npm run bundle` ran the repo's pinned node (devDependency).
# Same command as the last step of scripts/bundle.ts; it fails the build if V8 rejects the cache.
# Exec form with the absolute path: the runtime image has no shell and no node on a PATH lookup
# (distroless puts it at /nodejs/bin/node).
USER 0:0
RUN ["/nodejs/bin/node", "start.cjs", "--write-code-cache"]
# Numeric non-root user (matches runAsUser 65532; runAsNonRoot can verify it).
# The files stay root-owned and read-only: the pod runs with readOnlyRootFilesystem, and start.cjs
# only reads (no flags here or in NODE_OPTIONS: V8 flags that differ from the cache's reject it).
USER 65532:65532
# Knative sets PORT (8080).
EXPOSE 8080
ENTRYPOINT ["/nodejs/bin/node"]
CMD ["start.cjs"]
