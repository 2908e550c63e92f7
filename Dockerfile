# syntax=docker/dockerfile:1
# Image of the executor-service function (knative/base/service.yaml, func deploy).
#   docker build -t registry.example.com/team/spark-exec-svc:0.1.0 .
#
# The function ships as ONE bundled file (rolldown, `npm run bundle`): no node_modules at run
# time, and a cold start about half that of loading @kubernetes/client-node's ~870 modules from
# disk (docs/performance.md). test/bundle.test.ts builds the same bundle and runs it from a
# directory without node_modules.
#
# Build stage: Debian slim, not Alpine. `npm ci` installs the devDependency `node` (the repo's
# pinned Node 22, whose preinstall fetches a glibc binary) and rolldown's native binding.
ARG NODE_IMAGE=node:22-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY shared ./shared
COPY functions ./functions
RUN npm run bundle

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/dist/main.mjs ./main.mjs
# Numeric non-root user (matches runAsUser 65532; runAsNonRoot can verify it).
# The file stays root-owned and read-only: the pod runs with readOnlyRootFilesystem.
USER 65532:65532
# Knative sets PORT (8080).
EXPOSE 8080
CMD ["node", "main.mjs"]
