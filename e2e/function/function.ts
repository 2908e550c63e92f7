/**
 * The function as it ships: the bundle the container runs (scripts/bundle.ts → start.cjs +
 * main.cjs + its V8 code cache), started with the environment of the Knative Service in our
 * knative/ kustomization (derived from the kustomize output, not written here), the ServiceAccount
 * that the Service names, and the variables Knative Serving itself injects into a revision's
 * container (PORT, K_SERVICE, K_CONFIGURATION, K_REVISION).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { CONFIG_ENV_NAMES } from '../../shared/ops/config.ts';
import { REPO_ROOT, type KubeObject, type Rendered } from '../adapter/render.ts';
import { type PodProcess, type ServiceAccountFiles, startPodProcess } from './pod-process.ts';

const run = promisify(execFile);

/** `npm run bundle` into a fresh folder outside the clone; returns the folder (start.cjs inside). */
export async function bundleFunction(): Promise<string> {
  const out = mkdtempSync(join(tmpdir(), 'e2e-function-bundle-'));
  await run(process.execPath, [join(REPO_ROOT, 'scripts', 'bundle.ts'), out], {
    cwd: REPO_ROOT,
    maxBuffer: 16 << 20,
    timeout: 10 * 60_000,
  });
  return out;
}

const KnativeService = z.looseObject({
  apiVersion: z.literal('serving.knative.dev/v1'),
  kind: z.literal('Service'),
  metadata: z.looseObject({ name: z.string(), namespace: z.string() }),
  spec: z.looseObject({
    template: z.looseObject({
      spec: z.looseObject({
        serviceAccountName: z.string(),
        containers: z
          .array(
            z.looseObject({
              env: z
                .array(z.looseObject({ name: z.string(), value: z.string().optional(), valueFrom: z.unknown().optional() }))
                .default([]),
              ports: z.array(z.looseObject({ containerPort: z.number().int() })).default([]),
            }),
          )
          .length(1),
      }),
    }),
  }),
});

export interface FunctionDeployment {
  readonly name: string;
  readonly namespace: string;
  readonly serviceAccountName: string;
  /** The container's env exactly as the manifest sets it. */
  readonly env: Readonly<Record<string, string>>;
  readonly containerPort: number;
}

/** The function's Knative Service as our kustomization renders it: the ApiServerSource's sink. */
export function functionDeployment(rendered: Rendered): FunctionDeployment {
  const ref = rendered.adapter.sinkRef;
  const object: KubeObject | undefined = rendered.objects.find(
    (o) => o.apiVersion === ref.apiVersion && o.kind === ref.kind && o.metadata.name === ref.name,
  );
  const ksvc = KnativeService.parse(object);
  const container = ksvc.spec.template.spec.containers[0]!;
  const env: Record<string, string> = {};
  for (const e of container.env) {
    if (e.valueFrom !== undefined || e.value === undefined)
      throw new Error(`the function's env ${e.name} uses valueFrom, which this harness does not resolve`);
    env[e.name] = e.value;
  }
  return {
    name: ksvc.metadata.name,
    namespace: ksvc.metadata.namespace,
    serviceAccountName: ksvc.spec.template.spec.serviceAccountName,
    env,
    containerPort: container.ports[0]?.containerPort ?? 8080,
  };
}

export interface RunningFunction {
  readonly process: PodProcess;
  readonly url: string;
  readonly port: number;
  /** The env it was started with, and which of it the scenario changed from the manifest. */
  readonly env: Readonly<Record<string, string>>;
  readonly overrides: Readonly<Record<string, string>>;
}

export interface StartFunctionOptions {
  readonly bundleDir: string;
  readonly deployment: FunctionDeployment;
  readonly serviceAccount: ServiceAccountFiles;
  readonly apiServer: { readonly host: string; readonly port: number };
  /** Where it listens: Knative's PORT, chosen free here since the host's 8080 may be taken. */
  readonly port: number;
  /** Scenario changes to the manifest's env (e.g. a short COOLDOWN_SECONDS), reported as such. */
  readonly overrides?: Readonly<Record<string, string>>;
  readonly netnsPath?: string;
  readonly logFile?: string;
  readonly host?: string;
}

export async function startFunction(options: StartFunctionOptions): Promise<RunningFunction> {
  const d = options.deployment;
  const overrides = options.overrides ?? {};
  for (const key of Object.keys(overrides)) {
    // A variable the manifest leaves at its default may be set too, but only one the function reads.
    if (!(key in d.env) && !CONFIG_ENV_NAMES.has(key))
      throw new Error(`override ${key} is neither in the manifest's env nor read by the function`);
  }
  const env = {
    ...d.env,
    ...overrides,
    // Knative Serving's own variables in every user container (pkg/reconciler/revision/resources/deploy.go).
    PORT: String(options.port),
    K_SERVICE: d.name,
    K_CONFIGURATION: d.name,
    K_REVISION: `${d.name}-00001`,
  };
  const proc = startPodProcess({
    name: 'function',
    command: process.execPath,
    args: [join(options.bundleDir, 'start.cjs')],
    env,
    serviceAccount: options.serviceAccount,
    apiServer: options.apiServer,
    ...(options.netnsPath === undefined ? {} : { netnsPath: options.netnsPath }),
    ...(options.logFile === undefined ? {} : { logFile: options.logFile }),
  });
  await proc.waitForLine(/"msg":"listening"/, 30_000);
  const url = `http://${options.host ?? '127.0.0.1'}:${options.port}/`;
  await waitReady(`${url}health/readiness`, 10_000);
  return { process: proc, url, port: options.port, env, overrides };
}

async function waitReady(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      if (res.status === 200) return;
      last = `HTTP ${res.status}`;
    } catch (error) {
      last = String(error);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`function not ready at ${url} within ${timeoutMs} ms: ${last}`);
}
