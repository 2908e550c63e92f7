/**
 * Issue 17, "only the adapter may speak": with SENDER_AUTH=tokenreview the running function
 * accepts an event only with a bearer token that the API server (the emulator's TokenReview,
 * test/kube-emulator/tokenreview.ts) authenticates for the function's audience, from a trusted
 * ServiceAccount; everything else is answered 401/403 on the headers alone. Tokens are minted
 * like Knative's: a projected token of the source's OIDC ServiceAccount (knative/eventing
 * pkg/auth/serviceaccount.go) for the sink's audience <group>/<kind>/<namespace>/<name>
 * (pkg/auth/audience.go).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../shared/ops/config.ts';
import { startEmulator } from '../../packages/kube-emulator/index.ts';
import { goJson, podEventType, podSubject } from '../../testkit/apiserversource.ts';
import { type Harness, startHarness } from '../../testkit/harness.ts';
import { freePort } from '../../testkit/process.ts';
import { driverPod, executorPod, type PodBody, sparkAppId } from '../../testkit/spark-pods.ts';

const NS = 'spark';
const AUDIENCE = 'serving.knative.dev/service/spark/spark-exec-svc';
const APISERVER_SOURCE_SA = 'spark-exec-svc-pods-oidc-sources.knative.dev-apiserversource';
const PING_SOURCE_SA = 'spark-exec-svc-sweep-oidc-sources.knative.dev-pingsource';
const user = (sa: string) => `system:serviceaccount:${NS}:${sa}`;
const AUTH_ENV = {
  SENDER_AUTH: 'tokenreview',
  SENDER_AUTH_AUDIENCE: AUDIENCE,
  SENDER_AUTH_USERS: `${user(APISERVER_SOURCE_SA)},${user(PING_SOURCE_SA)}`,
};

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

function mint(serviceAccount: string, opts: { audiences?: string[]; expiresInSeconds?: number; namespace?: string } = {}): string {
  return h!.emulator.tokens.mint({
    namespace: opts.namespace ?? NS,
    serviceAccount,
    audiences: opts.audiences ?? [AUDIENCE],
    ...(opts.expiresInSeconds === undefined ? {} : { expiresInSeconds: opts.expiresInSeconds }),
  });
}

/** A pod event as the ApiServerSource adapter sends it, with the given Authorization header. */
async function sendPod(
  verb: 'add' | 'update',
  pod: PodBody,
  authorization?: string,
): Promise<{ status: number; text: string; type: string | null }> {
  const headers: Record<string, string> = {
    'ce-id': `${verb}-${pod.metadata.name}-${Math.random()}`,
    'ce-source': 'https://10.96.0.1:443',
    'ce-specversion': '1.0',
    'ce-type': podEventType(verb),
    'ce-subject': podSubject(pod.metadata.namespace, pod.metadata.name),
    'content-type': 'application/json',
    ...(authorization === undefined ? {} : { authorization }),
  };
  const response = await fetch(h!.url, { method: 'POST', headers, body: goJson(pod) });
  return { status: response.status, text: await response.text(), type: response.headers.get('ce-type') };
}

async function sendSweep(authorization: string): Promise<number> {
  const response = await fetch(h!.url, {
    method: 'POST',
    headers: {
      'ce-id': `ping-${Math.random()}`,
      'ce-source': '/apis/v1/namespaces/spark/pingsources/spark-exec-svc-sweep',
      'ce-specversion': '1.0',
      'ce-type': 'dev.knative.sources.ping',
      authorization,
    },
    body: '{"action":"sweep"}',
  });
  await response.text();
  return response.status;
}

/** Requests other than TokenReviews: pods, services (what an event costs). */
const podAndServiceRequests = () => h!.emulator.requests.filter((r) => r.resource !== 'tokenreviews').length;
const tokenReviews = () => h!.emulator.countRequests({ verb: 'create', resource: 'tokenreviews' });

function sparkApp(seed: number): { exec: PodBody } {
  const appId = sparkAppId(seed);
  const driver = h!.createPod(driverPod({ namespace: NS, appId }));
  const exec = h!.createPod(
    executorPod({
      namespace: NS,
      appId,
      execId: '1',
      driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
      blockManagerPort: 7079,
    }),
  );
  return { exec };
}

describe('SENDER_AUTH=tokenreview', () => {
  it("the ApiServerSource's and the PingSource's tokens are accepted; one review serves the same token for the cache time", async () => {
    h = await startHarness({ ...AUTH_ENV, SWEEP_MIN_INTERVAL_MS: '0' });
    const { exec } = sparkApp(1);
    const adapter = `Bearer ${mint(APISERVER_SOURCE_SA)}`;
    expect((await sendPod('add', exec, adapter)).type).toBe('spark-exec-svc.service.created');
    expect(h.services(NS)).toHaveLength(1);
    expect((await sendPod('update', exec, adapter)).status).toBe(200);
    expect(tokenReviews()).toBe(1);
    // The review asked for our audience.
    expect(h.emulator.tokens.reviews[0]!.audiences).toEqual([AUDIENCE]);
    expect(await sendSweep(`Bearer ${mint(PING_SOURCE_SA)}`)).toBe(200);
    expect(tokenReviews()).toBe(2);
  });

  it("no token, a token for another audience, an expired one, a tenant's: 401/403 before the body is read, and no API request at all", async () => {
    h = await startHarness(AUTH_ENV);
    const { exec } = sparkApp(2);
    h.emulator.resetRequests();
    const cases: Array<[string | undefined, number, RegExp]> = [
      [undefined, 401, /bearer token is required/],
      ['Basic dXNlcjpwYXNz', 401, /bearer token is required/],
      ['Bearer not-a-jwt', 401, /not a JWT/],
      [`Bearer ${mint(APISERVER_SOURCE_SA, { audiences: ['https://kubernetes.default.svc.cluster.local'] })}`, 401, /audience/],
      [`Bearer ${mint(APISERVER_SOURCE_SA, { expiresInSeconds: -10 })}`, 401, /expired/],
      [`Bearer ${mint('default')}`, 403, /system:serviceaccount:spark:default.*not a trusted sender/],
      [`Bearer ${mint(APISERVER_SOURCE_SA, { namespace: 'tenant' })}`, 403, /not a trusted sender/],
    ];
    for (const [authorization, status, message] of cases) {
      const reply = await sendPod('add', exec, authorization);
      expect(reply.status, String(authorization)).toBe(status);
      expect(reply.text).toMatch(message);
    }
    // Each was refused on its token's own claims: the API server was not even asked.
    expect(h.emulator.requests).toHaveLength(0);
    expect(h.services(NS)).toHaveLength(0);

    // "Before any parse beyond the headers": the body is never awaited. Declare 1 MiB, send 10 bytes.
    const port = h.fn.port;
    const answer = await new Promise<{ text: string; ms: number }>((resolve) => {
      const started = performance.now();
      let text = '';
      const socket = connect(port, '127.0.0.1', () =>
        socket.write(
          `POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/cloudevents+json\r\ncontent-length: 1048576\r\n\r\n{"deep":[[[`,
        ),
      );
      socket.on('data', (d: Buffer) => (text += d.toString()));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve({ text, ms: performance.now() - started }));
    });
    expect(answer.text).toMatch(/^HTTP\/1\.1 401/);
    expect(answer.ms).toBeLessThan(2_000);
  });

  it('a token that claims a trusted identity but that the API server does not vouch for is 401 (one review)', async () => {
    h = await startHarness(AUTH_ENV);
    const { exec } = sparkApp(3);
    const genuine = mint(APISERVER_SOURCE_SA);
    const [header, payload] = genuine.split('.');
    const forged = `${header}.${payload}.${'A'.repeat(43)}`;
    const reply = await sendPod('add', exec, `Bearer ${forged}`);
    expect(reply.status).toBe(401);
    expect(reply.text).toMatch(/did not authenticate/);
    expect(tokenReviews()).toBe(1);
    expect(podAndServiceRequests()).toBe(0);
    expect(h.services(NS)).toHaveLength(0);
  });

  it("a deleted ServiceAccount's token stops working once the cached review is older than SENDER_AUTH_CACHE_SECONDS", async () => {
    h = await startHarness({ ...AUTH_ENV, SENDER_AUTH_CACHE_SECONDS: '1' });
    const { exec } = sparkApp(4);
    const token = `Bearer ${mint(APISERVER_SOURCE_SA)}`;
    expect((await sendPod('add', exec, token)).status).toBe(200);
    h.emulator.tokens.deleteServiceAccount(NS, APISERVER_SOURCE_SA);
    expect((await sendPod('update', exec, token)).status).toBe(200); // cached: within the second
    expect(tokenReviews()).toBe(1);
    await new Promise((r) => setTimeout(r, 1_100));
    const reply = await sendPod('update', exec, token);
    expect(reply.status).toBe(401);
    expect(reply.text).toMatch(/has been deleted/);
    expect(tokenReviews()).toBe(2);
  });

  it('SENDER_AUTH_CACHE_SECONDS=0 asks every time; concurrent requests with one token share one review', async () => {
    h = await startHarness({ ...AUTH_ENV, SENDER_AUTH_CACHE_SECONDS: '0' });
    const { exec } = sparkApp(5);
    const token = `Bearer ${mint(APISERVER_SOURCE_SA)}`;
    h.emulator.faults.add({ resource: 'tokenreviews', fault: { kind: 'delay', ms: 200 } });
    const replies = await Promise.all(Array.from({ length: 10 }, () => sendPod('update', exec, token)));
    expect(replies.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(tokenReviews()).toBe(1);
    await sendPod('update', exec, token);
    expect(tokenReviews()).toBe(2);
  });

  it('when the TokenReview fails the event is 503 (redelivered), nothing is remembered, and the next one is accepted', async () => {
    h = await startHarness(AUTH_ENV);
    const { exec } = sparkApp(6);
    const token = `Bearer ${mint(APISERVER_SOURCE_SA)}`;
    h.emulator.faults.add({ resource: 'tokenreviews', fault: { kind: 'status', code: 500 } });
    const failed = await sendPod('add', exec, token);
    expect(failed.status).toBe(503);
    expect(failed.text).toMatch(/TokenReview failed/);
    expect(podAndServiceRequests()).toBe(0);
    expect((await sendPod('add', exec, token)).type).toBe('spark-exec-svc.service.created');
    expect(tokenReviews()).toBe(2);
  });
});

describe('configuration', () => {
  it('SENDER_AUTH=tokenreview needs an audience and trusted users, written as ServiceAccount usernames', () => {
    const load = (env: Record<string, string>) => () => loadConfig({ WATCH_NAMESPACES: NS, ...env }, () => undefined);
    expect(load({ SENDER_AUTH: 'tokenreview', SENDER_AUTH_USERS: user('a') })).toThrow(/SENDER_AUTH_AUDIENCE: required/);
    expect(load({ SENDER_AUTH: 'tokenreview', SENDER_AUTH_AUDIENCE: AUDIENCE })).toThrow(/SENDER_AUTH_USERS: required/);
    expect(load({ ...AUTH_ENV, SENDER_AUTH_USERS: 'spark/some-sa' })).toThrow(ConfigError);
    expect(load({ SENDER_AUTH: 'oidc' })).toThrow(/SENDER_AUTH/);
    expect(loadConfig({ WATCH_NAMESPACES: NS }, () => undefined).senderAuth).toBeUndefined();
    expect(loadConfig({ WATCH_NAMESPACES: NS, ...AUTH_ENV }, () => undefined).senderAuth).toEqual({
      audience: AUDIENCE,
      users: [user(APISERVER_SOURCE_SA), user(PING_SOURCE_SA)],
      cacheMs: 30_000,
    });
  });

  it('the real entry point warns at start-up while sender authentication is off', async () => {
    const emulator = await startEmulator();
    const dir = mkdtempSync(join(tmpdir(), 'sender-auth-'));
    const kubeconfig = join(dir, 'kubeconfig');
    emulator.writeKubeconfig(kubeconfig);
    const entry = fileURLToPath(new URL('../../functions/executor-service/main.ts', import.meta.url));
    const child = spawn(process.execPath, [entry], {
      env: { ...process.env, KUBECONFIG: kubeconfig, WATCH_NAMESPACES: NS, PORT: String(await freePort()) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(() => reject(new Error(`no warning within 60 s; output: ${out}`)), 60_000);
        child.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          const found = out
            .split('\n')
            .filter((l) => l.startsWith('{'))
            .map((l) => JSON.parse(l) as Record<string, unknown>)
            .find((l) => /sender authentication is off/.test(String(l['msg'])));
          if (found !== undefined) {
            clearTimeout(timer);
            resolve(found);
          }
        });
      });
      expect(line['level']).toBe('warn');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      await emulator.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
