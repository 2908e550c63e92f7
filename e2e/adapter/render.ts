/**
 * What our knative/ kustomizations become on a cluster, computed by upstream code (e2e/go/render):
 * the objects `kubectl apply -k` would create (sigs.k8s.io/kustomize/api), and the environment of
 * the receive adapter that Knative Eventing's ApiServerSource reconciler would run for our
 * ApiServerSource (pkg/reconciler/apiserversource/resources/receive_adapter.go, knative.dev/eventing
 * at the version e2e/go/adapter builds). Parsed with zod here, at the edge.
 */
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { z } from 'zod';
import { configuredTree, TEST_IMAGE } from '../../test/ops/kustomize.ts';

const run = promisify(execFile);
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BUILD_SH = join(REPO_ROOT, 'e2e', 'build.sh');

/**
 * The kustomizations the scenarios run: the default install and its Reference-mode overlay,
 * relative to a tree holding knative/ and spark/. The repository's own tree does not build until
 * knative/base/image.env sets IMAGE (on purpose, docs/deploy.md step 1), so the scenarios render a
 * configured copy of it (`configuredKustomizations`).
 */
export const KUSTOMIZATIONS = {
  resource: join('knative', 'base'),
  reference: join('knative', 'overlays', 'reference-mode'),
} as const;
export type SourceMode = keyof typeof KUSTOMIZATIONS;

/** The base with sender authentication on (Resource mode): the function trusts only the sources' OIDC identities. */
export const SENDER_AUTH_KUSTOMIZATION = join('knative', 'overlays', 'sender-auth');

/** A configured copy of knative/ and spark/; `remove()` deletes it. */
export interface ConfiguredKustomizations {
  readonly root: string;
  readonly dirs: { readonly [mode in SourceMode]: string };
  readonly senderAuth: string;
  remove(): void;
}

/**
 * A copy of the repository's knative/ and spark/ with IMAGE set to the unit tests' image
 * (test/ops/kustomize.ts): the image is never pulled here (the function runs from its bundle),
 * it only has to be set for kustomize to build, as a user's install sets it.
 */
export function configuredKustomizations(): ConfiguredKustomizations {
  const root = configuredTree(TEST_IMAGE);
  return {
    root,
    dirs: { resource: join(root, KUSTOMIZATIONS.resource), reference: join(root, KUSTOMIZATIONS.reference) },
    senderAuth: join(root, SENDER_AUTH_KUSTOMIZATION),
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}

const Manifest = z.record(z.string(), z.string());

/**
 * Builds (or finds in the cache) the receive adapter and the render helper; e2e/build.sh keys them
 * by knative.dev/eventing's version and a hash of our Go modules.
 */
export async function adapterBinaries(): Promise<{ adapter: string; render: string }> {
  // Binaries built elsewhere (the same versions), e.g. while the cache is being filled.
  const given = { adapter: process.env['E2E_ADAPTER_BIN'], render: process.env['E2E_RENDER_BIN'] };
  if (given.adapter !== undefined && given.render !== undefined) return { adapter: given.adapter, render: given.render };
  const { stdout } = await run('bash', [BUILD_SH, 'adapter', 'render'], { maxBuffer: 16 << 20, timeout: 30 * 60_000 });
  const lines = stdout.trim().split('\n');
  const manifest = Manifest.parse(JSON.parse(lines[lines.length - 1] ?? '{}'));
  const adapter = manifest['adapter'];
  const render = manifest['render'];
  if (adapter === undefined || render === undefined) throw new Error(`e2e/build.sh printed no adapter/render path: ${stdout}`);
  return { adapter, render };
}

const EnvVar = z.object({ name: z.string(), value: z.string().default('') });

const KubeObject = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  metadata: z.looseObject({ name: z.string(), namespace: z.string().optional(), labels: z.record(z.string(), z.string()).optional() }),
});
export type KubeObject = z.infer<typeof KubeObject>;

/** With `authentication-oidc` on: what the sources' reconcilers create, and who sends tokens for which audience. */
const Oidc = z.object({
  objects: z.array(KubeObject),
  senders: z.array(
    z.object({ kind: z.string(), name: z.string(), namespace: z.string(), serviceAccount: z.string(), audience: z.string() }),
  ),
});
export type Oidc = z.infer<typeof Oidc>;

const Rendered = z.object({
  objects: z.array(KubeObject),
  oidc: Oidc.optional(),
  adapter: z.object({
    sourceName: z.string(),
    sourceNamespace: z.string(),
    mode: z.enum(['Resource', 'Reference']),
    serviceAccountName: z.string(),
    sinkRef: z.looseObject({ apiVersion: z.string(), kind: z.string(), name: z.string(), namespace: z.string().optional() }),
    env: z.array(EnvVar),
    labels: z.record(z.string(), z.string()),
    container: z.looseObject({}),
  }),
});
export type Rendered = z.infer<typeof Rendered>;

/**
 * `kustomize build` of one of our kustomizations plus the receive adapter's environment. `sinkUrl`
 * stands in for the address Knative Serving would give the function's Service (out of cluster it
 * has none): the only value of the env not derived from the manifests.
 */
export async function render(
  renderBin: string,
  kustomization: string,
  sinkUrl: string,
  options: { oidc?: boolean } = {},
): Promise<Rendered> {
  const args = ['manifests', '-dir', kustomization, '-sink', sinkUrl, '-eventing-config', dirname(renderBin)];
  const { stdout } = await run(renderBin, options.oidc === true ? [...args, '-oidc'] : args, { maxBuffer: 16 << 20 });
  const rendered = Rendered.parse(JSON.parse(stdout));
  const sink = rendered.adapter.sinkRef;
  const target = rendered.objects.find((o) => o.apiVersion === sink.apiVersion && o.kind === sink.kind && o.metadata.name === sink.name);
  if (target === undefined) {
    throw new Error(`the ApiServerSource's sink ${sink.kind}/${sink.name} is not among the objects of ${kustomization}`);
  }
  return rendered;
}

/** Sends one PingSource tick per PingSource of the kustomization, as the mtping adapter would (e2e/go/render); with OIDC, with its token. */
export async function sendPing(renderBin: string, kustomization: string, sinkUrl: string, token?: string): Promise<void> {
  const args = ['ping', '-dir', kustomization, '-sink', sinkUrl];
  await run(renderBin, token === undefined ? args : [...args, '-token', token], { maxBuffer: 1 << 20, timeout: 60_000 });
}

export function envRecord(env: ReadonlyArray<{ name: string; value: string }>): Record<string, string> {
  return Object.fromEntries(env.map((e) => [e.name, e.value]));
}

/** The one object of this kind and name in a rendered kustomization. */
export function findObject(objects: readonly KubeObject[], kind: string, name: string): KubeObject {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind}/${name} in the kustomize output, found ${found.length}`);
  return found[0]!;
}
