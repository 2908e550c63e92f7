/**
 * Identities on the real API server: apply our knative/ RBAC objects with the admin's token, and
 * mint tokens of their ServiceAccounts through the TokenRequest API (what the kubelet does for a
 * pod's projected service-account token), so every process of the harness runs with the rights our
 * manifests give it and no more.
 */
import { request as httpsRequest } from 'node:https';
import * as k8s from '@kubernetes/client-node';
import type { KubeObject } from './render.ts';

/** How to reach the API server as someone: its URL, the CA that signed its serving certificate, a bearer token. */
export interface ApiAccess {
  readonly server: string;
  readonly caPem: string;
  readonly token: string;
}

export function kubeConfigOf(access: ApiAccess, user = 'user'): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'e2e', server: access.server, caData: Buffer.from(access.caPem).toString('base64'), skipTLSVerify: false }],
    users: [{ name: user, token: access.token }],
    contexts: [{ name: 'e2e', cluster: 'e2e', user }],
    currentContext: 'e2e',
  });
  return kc;
}

/** The kinds of our manifests that a bare API server serves (the Knative kinds need Knative's CRDs and controllers). */
export const CORE_KINDS: ReadonlySet<string> = new Set([
  'Namespace',
  'ServiceAccount',
  'Role',
  'RoleBinding',
  'ClusterRole',
  'ClusterRoleBinding',
  'ResourceQuota',
  'ConfigMap',
]);

/**
 * Creates each object (or replaces it when it exists), in the order given after namespaces; returns
 * what was applied. Objects of other kinds are left out, and listed by the caller if it cares.
 */
export async function applyObjects(admin: ApiAccess, objects: readonly KubeObject[]): Promise<KubeObject[]> {
  const client = k8s.KubernetesObjectApi.makeApiClient(kubeConfigOf(admin, 'admin'));
  const applied: KubeObject[] = [];
  const ordered = [...objects].sort((a, b) => Number(b.kind === 'Namespace') - Number(a.kind === 'Namespace'));
  for (const object of ordered) {
    if (!CORE_KINDS.has(object.kind)) continue;
    const spec = object as unknown as k8s.KubernetesObject;
    try {
      await client.create(spec);
    } catch (error) {
      if (!(error instanceof k8s.ApiException) || error.code !== 409)
        throw describe(error, `create ${object.kind}/${object.metadata.name}`);
      const current = await client.read({
        apiVersion: object.apiVersion,
        kind: object.kind,
        metadata: { name: object.metadata.name, namespace: object.metadata.namespace ?? '' },
      });
      await client.replace({ ...spec, metadata: { ...spec.metadata, resourceVersion: current.metadata?.resourceVersion } });
    }
    applied.push(object);
  }
  return applied;
}

export async function ensureNamespace(admin: ApiAccess, name: string): Promise<void> {
  const core = kubeConfigOf(admin, 'admin').makeApiClient(k8s.CoreV1Api);
  try {
    await core.createNamespace({ body: { metadata: { name } } });
  } catch (error) {
    if (!(error instanceof k8s.ApiException) || error.code !== 409) throw describe(error, `create namespace ${name}`);
  }
}

/**
 * A bound token of the ServiceAccount (TokenRequest; no audiences = the API server's default), as the
 * kubelet mints for a pod's projected volume, or for given audiences, as Knative's OIDC token
 * provider asks for a source's (knative/eventing pkg/auth/token_provider.go). The ServiceAccount must exist.
 */
export async function serviceAccountToken(
  admin: ApiAccess,
  namespace: string,
  name: string,
  expirationSeconds = 3600,
  audiences: readonly string[] = [],
): Promise<string> {
  const core = kubeConfigOf(admin, 'admin').makeApiClient(k8s.CoreV1Api);
  try {
    const answer = await core.createNamespacedServiceAccountToken({
      namespace,
      name,
      body: { spec: { audiences: [...audiences], expirationSeconds } },
    });
    const token = answer.status?.token;
    if (token === undefined || token === '') throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
    return token;
  } catch (error) {
    throw describe(error, `TokenRequest for serviceaccount ${namespace}/${name}`);
  }
}

/** A ServiceAccount of the caller's own (the tenant, the scenario's helpers), bound to a Role of the given rules. */
export async function createServiceAccountWithRole(
  admin: ApiAccess,
  namespace: string,
  name: string,
  rules: ReadonlyArray<{ apiGroups: string[]; resources: string[]; verbs: string[] }>,
): Promise<void> {
  await applyObjects(admin, [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name, namespace }, rules },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  ] as KubeObject[]);
}

function describe(error: unknown, what: string): Error {
  if (error instanceof k8s.ApiException)
    return new Error(`${what}: HTTP ${error.code}: ${typeof error.body === 'string' ? error.body : JSON.stringify(error.body)}`);
  return new Error(`${what}: ${error instanceof Error ? error.message : String(error)}`);
}

/**
 * One request to the API server as JSON, with no client library in between: the object as the API
 * server encodes it (field names as in the API), and the status code.
 */
export function rawRequest(
  access: ApiAccess,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<{ status: number; body: unknown }> {
  const url = new URL(path, access.server);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: url.hostname,
        port: url.port,
        path: `${url.pathname}${url.search}`,
        method,
        ca: access.caPem,
        headers: {
          authorization: `Bearer ${access.token}`,
          accept: 'application/json',
          ...(payload === undefined ? {} : { 'content-type': contentType, 'content-length': String(Buffer.byteLength(payload)) }),
        },
        timeout: 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            /* not JSON: keep the text */
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 30 s`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** GET that must succeed; returns the JSON body. */
export async function rawGet(access: ApiAccess, path: string): Promise<unknown> {
  const answer = await rawRequest(access, 'GET', path);
  if (answer.status !== 200) throw new Error(`GET ${path}: HTTP ${answer.status}: ${JSON.stringify(answer.body)}`);
  return answer.body;
}
