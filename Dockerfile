# syntax=docker/dockerfile:1
# Image of the executor-service function (knative/base/service.yaml, func deploy).
#   docker build -t registry.example.com/team/spark-exec-svc:0.1.0 .
#
# Build stage: Debian slim, not Alpine. `npm ci` installs the devDependency `node`
# (the repo's pinned Node 22, whose preinstall fetches a glibc binary) and
# `npm run build` runs tsc with it; that binary does not run on musl.
ARG NODE_IMAGE=node:22-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY shared ./shared
COPY functions ./functions
RUN npm run build

# Production dependencies only: --omit=dev leaves out typescript, vitest and the
# `node` binary package; no production dependency has an install script.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
# package.json is needed at run time: "type": "module" makes dist/**/*.js ESM.
COPY package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Numeric non-root user (matches runAsUser 65532; runAsNonRoot can verify it).
# Files stay root-owned and read-only: the pod runs with readOnlyRootFilesystem.
USER 65532:65532
# Knative sets PORT (8080).
EXPOSE 8080
CMD ["node", "dist/functions/executor-service/main.js"]
