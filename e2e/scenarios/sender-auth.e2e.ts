/**
 * Issue 17, "only the adapter may speak", on the real thing: Knative's event-delivery
 * authentication (`authentication-oidc`) as the real ApiServerSource receive adapter v0.48.2 does
 * it, against kube-apiserver v1.34.4, with the function installed by knative/overlays/sender-auth.
 *
 * What the reconcilers would create with the feature on is computed by their own code
 * (e2e/go/render -oidc): the sources' OIDC ServiceAccounts (pkg/auth GetOIDCServiceAccountForResource,
 * `<source>-oidc-sources.knative.dev-<kind>`), the Role + RoleBinding that let the adapter's own
 * ServiceAccount request tokens for its OIDC one (resources.MakeOIDCRole/MakeOIDCRoleBinding),
 * and the adapter's K_AUDIENCE (spec.sink.audience) and K_OIDC_SERVICE_ACCOUNT. The adapter then
 * asks TokenRequest for a token of its OIDC ServiceAccount for that audience and sends it as
 * `Authorization: Bearer` (pkg/adapter/v2 cloudevents.go withAuthHeader); the function asks the
 * real API server about it (TokenReview) and trusts the users its overlay names.
 *
 * Shown: the adapter's events accepted and the Services made; a pod's forged event refused —
 * 403 with its own ServiceAccount's token for our audience, 401 with the token a pod has mounted
 * (the API server's audience) and 401 with none — and nothing written; what the adapter does with
 * a 403 and a 401 (sent once, not retried, dropped; the next event goes on); the sweep's
 * PingSource token accepted and the sweep repairing what was dropped. The invariant is read from
 * the real API server after every step. Figures go to sender-auth-report.json in the log dir.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NS } from '../../test/support/audited.ts';
import { adapterEvent, podEventType, podSubject } from '../../testkit/apiserversource.ts';
import { rawGet, serviceAccountToken } from '../adapter/kube-access.ts';
import type { RecordedRequest } from '../adapter/recording-proxy.ts';
import type { Oidc } from '../adapter/render.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { realInvariantProblems } from './invariant-real.ts';
import { waitUntil } from './observe.ts';
import { type Plane, TENANT, startPlane } from './plane.ts';
import { reportAndStop } from './report-file.ts';
import { createPod, driverPodBody, executorPodBody, markRunning, type PodRef } from './spark-pods.ts';

const report: Record<string, unknown> = {};
let cluster: ScenarioCluster;
let plane: Plane;
let oidc: Oidc;
let podIpSeq = 10;
const nextPodIp = (): string => `10.244.0.${podIpSeq++}`;
const genuine = new Set<string>();

const sender = (kind: string): Oidc['senders'][number] => {
  const found = oidc.senders.find((s) => s.kind === kind);
  if (found === undefined) throw new Error(`no OIDC sender of kind ${kind} in the render`);
  return found;
};
const userOf = (s: { namespace: string; serviceAccount: string }): string => `system:serviceaccount:${s.namespace}:${s.serviceAccount}`;
const subjectOf = (name: string): string => `/apis/v1/namespaces/${NS}/pods/${name}`;
const adapterRequests = (from = 0): RecordedRequest[] =>
  plane.proxy.requests.slice(from).filter((r) => (r.headers['ce-type'] ?? '').startsWith('dev.knative.apiserver.'));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A JWT's claims, unverified: only to say what the adapter sent. */
function claimsOf(authorization: string | undefined): { sub?: string; aud?: string | string[]; exp?: number; iat?: number } | undefined {
  const token = /^Bearer (.+)$/.exec(authorization ?? '')?.[1];
  const payload = token?.split('.')[1];
  return payload === undefined ? undefined : (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, never>);
}

async function serviceOf(appId: string, execId: number): Promise<{ metadata: { name: string; resourceVersion: string } } | undefined> {
  const list = (await rawGet(
    cluster.endpoints.admin,
    `/api/v1/namespaces/${NS}/services?labelSelector=spark-app-selector%3D${appId},spark-exec-id%3D${execId}`,
  )) as { items: Array<{ metadata: { name: string; resourceVersion: string } }> };
  return list.items[0];
}

async function servicesVersions(): Promise<string[]> {
  const list = (await rawGet(cluster.endpoints.admin, `/api/v1/namespaces/${NS}/services`)) as {
    items: Array<{ metadata: { name: string; resourceVersion: string } }>;
  };
  return list.items.map((s) => `${s.metadata.name}@${s.metadata.resourceVersion}`).sort();
}

async function running(body: Record<string, unknown>): Promise<PodRef> {
  const pod = await createPod(plane.tenant, NS, body);
  if (!cluster.kubelet) await markRunning(cluster.endpoints.admin, NS, pod.name, nextPodIp());
  return pod;
}

async function expectInvariant(step: string): Promise<void> {
  expect(await realInvariantProblems(cluster.endpoints.admin, undefined, genuine), `invariant after: ${step}`).toEqual([]);
}

/** A pod event as the adapter sends it (its headers, Go JSON body), with the given Authorization. */
async function postAs(authorization: string | undefined, verb: 'add' | 'update' | 'delete', pod: unknown, name: string): Promise<number> {
  const event = adapterEvent({ type: podEventType(verb), data: pod, subject: podSubject(NS, name) });
  const headers: Record<string, string> = { ...event.headers };
  delete headers['content-length'];
  if (authorization !== undefined) headers['authorization'] = authorization;
  const response = await fetch(plane.fn().url, { method: 'POST', headers, body: event.body });
  await response.text();
  return response.status;
}

/** Per CloudEvent id: how many times the adapter sent it and what each attempt got. */
function attemptsById(requests: readonly RecordedRequest[]): Map<string, Array<number | 'cut' | undefined>> {
  const byId = new Map<string, Array<number | 'cut' | undefined>>();
  for (const r of requests) {
    const id = r.headers['ce-id'] ?? '';
    byId.set(id, [...(byId.get(id) ?? []), r.status]);
  }
  return byId;
}

beforeAll(async () => {
  cluster = await scenarioCluster('sender-auth', { kubelet: false });
  plane = await startPlane(cluster.endpoints, { mode: 'resource', functionPort: 21_000 + (process.pid % 1000), senderAuth: true });
  if (plane.rendered.oidc === undefined) throw new Error('the render has no OIDC part');
  oidc = plane.rendered.oidc;
  report['oidcSenders'] = oidc.senders;
  report['adapterEnv'] = plane.adapter().env;
  report['functionEnv'] = plane.fn().env;
  report['functionOverrides'] = plane.fn().overrides;
}, 30 * 60_000);

afterAll(async () => {
  report['requests'] = plane?.proxy.requests.map((r) => ({
    seq: r.seq,
    atMs: r.receivedAtMs,
    type: r.headers['ce-type'],
    subject: r.headers['ce-subject'],
    id: r.headers['ce-id'],
    sub: claimsOf(r.headers['authorization'])?.sub,
    status: r.status,
    port: r.remotePort,
  }));
  await reportAndStop(cluster, plane, 'sender-auth-report.json', report);
});

describe('sender authentication with the real adapter’s OIDC tokens (knative/overlays/sender-auth)', () => {
  test('the overlay trusts exactly the identities Knative gives the two sources, for the audience they are told to request', () => {
    // Knative's names (pkg/auth GetOIDCServiceAccountNameForResource: kmeta.ChildName(<source>, "-oidc-<group>-<kind>"), lower case).
    expect(oidc.senders.map((s) => `${s.kind} ${s.serviceAccount}`).sort()).toEqual([
      'ApiServerSource spark-exec-svc-pods-oidc-sources.knative.dev-apiserversource',
      'PingSource spark-exec-svc-sweep-oidc-sources.knative.dev-pingsource',
    ]);
    const env = plane.fn().env;
    expect(env['SENDER_AUTH']).toBe('tokenreview');
    expect((env['SENDER_AUTH_USERS'] ?? '').split(',').sort()).toEqual(oidc.senders.map(userOf).sort());
    for (const s of oidc.senders) expect(s.audience, `${s.kind}'s audience`).toBe(env['SENDER_AUTH_AUDIENCE']);
    // What the reconciler gives the adapter to ask for its tokens with (receive_adapter.go makeEnv).
    expect(plane.adapter().env['K_AUDIENCE']).toBe(env['SENDER_AUTH_AUDIENCE']);
    expect(plane.adapter().env['K_OIDC_SERVICE_ACCOUNT']).toBe(sender('ApiServerSource').serviceAccount);
  });

  test('the adapter’s events carry its OIDC token and are accepted: the Services are made', async () => {
    const from = plane.proxy.requests.length;
    const driver = await running(
      driverPodBody(NS, 'auth-app', 'auth-app-driver', `/tmp/spark-exec-svc-e2e-${process.pid}-auth-app.finished`),
    );
    for (let i = 1; i <= 3; i++) genuine.add((await running(executorPodBody(NS, 'auth-app', driver, i, `auth-app-exec-${i}`))).name);
    const started = Date.now();
    for (let i = 1; i <= 3; i++) await waitUntil(`the Service of auth-app executor ${i}`, 60_000, () => serviceOf('auth-app', i));
    report['servicesMadeMs'] = Date.now() - started;
    await expectInvariant('three executors added through the adapter with OIDC');
    // Updates of the pods may still be on their way: every event sent so far, answered.
    const sent = await waitUntil('every adapter event answered', 10_000, async () => {
      const all = adapterRequests(from);
      return all.every((r) => r.status !== undefined) ? all : undefined;
    });
    expect(sent.length).toBeGreaterThan(0);
    const subjects = new Set(sent.map((r) => claimsOf(r.headers['authorization'])?.sub));
    const audiences = new Set(sent.map((r) => JSON.stringify(claimsOf(r.headers['authorization'])?.aud)));
    const tokens = new Set(sent.map((r) => r.headers['authorization']));
    const first = claimsOf(sent[0]!.headers['authorization']);
    report['adapterToken'] = {
      sub: [...subjects],
      aud: [...audiences],
      lifetimeSeconds: first?.exp !== undefined && first.iat !== undefined ? first.exp - first.iat : undefined,
      distinctTokens: tokens.size,
      events: sent.length,
      statuses: sent.map((r) => r.status),
    };
    expect([...subjects]).toEqual([userOf(sender('ApiServerSource'))]);
    expect([...audiences]).toEqual([JSON.stringify([plane.fn().env['SENDER_AUTH_AUDIENCE']])]);
    expect(sent.every((r) => typeof r.status === 'number' && r.status < 300)).toBe(true);
  });

  test('a pod’s forged event: its own ServiceAccount’s token 403, the token a pod has mounted 401, a self-made token naming the adapter 401 (TokenReview), no token 401 — nothing written', async () => {
    const victim = (await rawGet(cluster.endpoints.admin, `/api/v1/namespaces/${NS}/pods/auth-app-exec-1`)) as Record<string, unknown>;
    const admin = cluster.endpoints.admin;
    const audience = plane.fn().env['SENDER_AUTH_AUDIENCE']!;
    // A pod of the tenant can ask TokenRequest for its own ServiceAccount only where RBAC lets it;
    // the test mints it (the worst case): a valid token, our audience, an identity not trusted.
    const tenantForOurAudience = await serviceAccountToken(admin, NS, TENANT, 600, [audience]);
    // What every pod has mounted: its ServiceAccount's token for the API server's own audience.
    const tenantMounted = await serviceAccountToken(admin, NS, TENANT, 600);
    // The adapter's own ServiceAccount (not its OIDC one), for our audience: not a trusted sender either.
    const adapterPodIdentity = await serviceAccountToken(admin, NS, plane.rendered.adapter.serviceAccountName, 600, [audience]);
    // A JWT that claims the adapter's identity and our audience but that no issuer signed: it passes
    // the function's look at its claims, and the API server's TokenReview refuses it.
    const b64 = (o: unknown): string => Buffer.from(JSON.stringify(o)).toString('base64url');
    const forgedClaims = {
      iss: 'https://kubernetes.default.svc.cluster.local',
      sub: userOf(sender('ApiServerSource')),
      aud: [audience],
      exp: Math.floor(Date.now() / 1000) + 3600,
      iat: Math.floor(Date.now() / 1000),
    };
    const forgedJwt = `${b64({ alg: 'RS256', kid: 'forged' })}.${b64(forgedClaims)}.${Buffer.from('not a signature').toString('base64url')}`;
    const before = await servicesVersions();
    const answers = {
      adapterIdentityForged: await postAs(`Bearer ${forgedJwt}`, 'delete', victim, 'auth-app-exec-1'),
      tenantTokenForOurAudience: await postAs(`Bearer ${tenantForOurAudience}`, 'delete', victim, 'auth-app-exec-1'),
      tenantMountedToken: await postAs(`Bearer ${tenantMounted}`, 'delete', victim, 'auth-app-exec-1'),
      adapterPodIdentityForOurAudience: await postAs(`Bearer ${adapterPodIdentity}`, 'delete', victim, 'auth-app-exec-1'),
      noToken: await postAs(undefined, 'delete', victim, 'auth-app-exec-1'),
      notAJwt: await postAs('Bearer not-a-token', 'delete', victim, 'auth-app-exec-1'),
    };
    report['forgedAnswers'] = answers;
    expect(answers).toEqual({
      adapterIdentityForged: 401,
      tenantTokenForOurAudience: 403,
      tenantMountedToken: 401,
      adapterPodIdentityForOurAudience: 403,
      noToken: 401,
      notAJwt: 401,
    });
    expect(await servicesVersions(), 'no Service written').toEqual(before);
    await expectInvariant('forged deletes with wrong or no tokens');
    // The same token, accepted from the trusted identity: the OIDC ServiceAccount's, minted as the adapter's provider does.
    const adapterOidc = await serviceAccountToken(admin, NS, sender('ApiServerSource').serviceAccount, 600, [audience]);
    expect(await postAs(`Bearer ${adapterOidc}`, 'update', victim, 'auth-app-exec-1')).toBeLessThan(300);
  });

  test('what the adapter does with a 403 and a 401: each event sent once, not retried, dropped; the next goes on; the sweep repairs', async () => {
    const env = plane.fn().env;
    const original = plane.fn().overrides;
    const driver = await running(
      driverPodBody(NS, 'drop-app', 'drop-app-driver', `/tmp/spark-exec-svc-e2e-${process.pid}-drop-app.finished`),
    );
    await sleep(2_000);
    const refusedWith = async (overrides: Record<string, string>, execId: number): Promise<RecordedRequest[]> => {
      await plane.killFunction();
      await plane.restartFunction({ ...original, ...overrides });
      const from = plane.proxy.requests.length;
      const before = await servicesVersions();
      const exec = await running(executorPodBody(NS, 'drop-app', driver, execId, `drop-app-exec-${execId}`));
      genuine.add(exec.name);
      await plane.proxy.waitFor((r) => r.seq >= from && r.headers['ce-subject'] === subjectOf(exec.name), 30_000, `events of ${exec.name}`);
      // The adapter's retries (if any) of a 503 are 0.1…1.6 s apart (delivery.e2e.ts): wait past them.
      await sleep(5_000);
      // The half of the invariant a refusal can keep: nothing written. The other half (the new
      // executor's Service exists) waits for the sweep below — a refused event is lost.
      expect(await servicesVersions(), `no Service written while executor ${execId}'s events are refused`).toEqual(before);
      return adapterRequests(from);
    };
    // 403: the function does not trust the adapter's identity (only the PingSource's).
    const forbidden = await refusedWith({ SENDER_AUTH_USERS: userOf(sender('PingSource')) }, 1);
    // 401: the function expects another audience than the one the adapter's token is for.
    const unauthenticated = await refusedWith({ SENDER_AUTH_AUDIENCE: 'serving.knative.dev/service/spark/someone-else' }, 2);
    const summary = (rs: RecordedRequest[]) => ({
      statuses: rs.map((r) => r.status),
      attemptsPerEvent: [...attemptsById(rs).values()].map((a) => a.length),
      newConnections: new Set(rs.map((r) => r.remotePort)).size,
    });
    report['adapterOn403'] = summary(forbidden);
    report['adapterOn401'] = summary(unauthenticated);
    expect(forbidden.length).toBeGreaterThan(0);
    expect(forbidden.every((r) => r.status === 403)).toBe(true);
    expect(unauthenticated.length).toBeGreaterThan(0);
    expect(unauthenticated.every((r) => r.status === 401)).toBe(true);
    // cloudevents sdk-go v2.16.1 retries only 404/413/425/429/502/503/504: each event was sent once.
    for (const [id, attempts] of [...attemptsById(forbidden), ...attemptsById(unauthenticated)])
      expect(attempts, `attempts of event ${id}`).toHaveLength(1);
    expect(await serviceOf('drop-app', 1), 'no Service made from a refused event').toBeUndefined();
    expect(await serviceOf('drop-app', 2), 'no Service made from a refused event').toBeUndefined();

    // The configuration put right: the adapter's next events are accepted, and one sweep (the
    // PingSource's token) makes the Services of the events that were dropped.
    await plane.killFunction();
    await plane.restartFunction(original);
    expect(plane.fn().env['SENDER_AUTH_USERS']).toBe(env['SENDER_AUTH_USERS']);
    const from = plane.proxy.requests.length;
    await plane.sweep();
    const ping = plane.proxy.requests.slice(from).find((r) => r.headers['ce-type'] === 'dev.knative.sources.ping');
    expect(ping?.status).toBeLessThan(300);
    expect(claimsOf(ping?.headers['authorization'])?.sub).toBe(userOf(sender('PingSource')));
    for (const id of [1, 2])
      await waitUntil(`the Service of drop-app executor ${id} after the sweep`, 30_000, () => serviceOf('drop-app', id));
    await expectInvariant('sweep after the refusals');
    const exec3 = await running(executorPodBody(NS, 'drop-app', driver, 3, 'drop-app-exec-3'));
    genuine.add(exec3.name);
    await waitUntil('the Service of drop-app executor 3 (adapter accepted again)', 60_000, () => serviceOf('drop-app', 3));
    await expectInvariant('executor 3 added after the configuration was put right');
  });
});
