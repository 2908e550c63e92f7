import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator } from '../../packages/kube-emulator/index.ts';
import { podEventType, postCloudEvent } from '../../testkit/apiserversource.ts';
import { type Harness, startHarness } from '../../testkit/harness.ts';
import { freePort, waitForHttpOk } from '../../testkit/process.ts';
import { driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

const NS = 'spark';
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('HTTP surface', () => {
  it('serves liveness and readiness, and refuses other routes and methods', async () => {
    h = await startHarness();
    const base = h.url.replace(/\/$/, '');
    expect((await fetch(`${base}/health/liveness`)).status).toBe(200);
    expect((await fetch(`${base}/health/readiness`)).status).toBe(200);
    expect((await fetch(`${base}/`)).status).toBe(405);
    expect((await fetch(`${base}/nope`, { method: 'POST' })).status).toBe(404);
  });

  it('answers malformed input with a clear 400 and stays up, with no API call', async () => {
    h = await startHarness();
    h.emulator.resetRequests();
    const post = (headers: Record<string, string>, body: string) => fetch(h!.url, { method: 'POST', headers, body });
    const cases: Array<[Record<string, string>, string, RegExp]> = [
      [{ 'content-type': 'application/json' }, '{}', /CloudEvent/],
      [{ 'content-type': 'application/cloudevents+json' }, '{not json', /CloudEvent/],
      [{ 'content-type': 'application/cloudevents+json' }, JSON.stringify({ specversion: '1.0', type: 'x' }), /CloudEvent/],
      [
        { 'ce-specversion': '1.0', 'ce-id': '1', 'ce-source': 's', 'ce-type': podEventType('add'), 'content-type': 'application/json' },
        '[1,2',
        /JSON|CloudEvent/,
      ],
      [
        { 'ce-specversion': '1.0', 'ce-id': '1', 'ce-source': 's', 'ce-type': podEventType('add'), 'content-type': 'application/json' },
        '"a string"',
        /JSON object|Kubernetes object/,
      ],
      [
        { 'ce-specversion': '1.0', 'ce-id': '1', 'ce-source': 's', 'ce-type': podEventType('add'), 'content-type': 'application/json' },
        JSON.stringify({
          kind: 'Pod',
          metadata: {
            name: 'x',
            namespace: NS,
            uid: 'u',
            labels: { 'spark-role': 'executor', 'spark-app-selector': '$(reboot)', 'spark-exec-id': '1' },
          },
        }),
        /invalid Pod/,
      ],
    ];
    for (const [headers, body, message] of cases) {
      const response = await post(headers, body);
      expect(response.status, body).toBe(400);
      expect(((await response.json()) as { error: string }).error).toMatch(message);
    }
    const big = await post(
      { 'ce-specversion': '1.0', 'ce-id': '1', 'ce-source': 's', 'ce-type': podEventType('add'), 'content-type': 'application/json' },
      'x'.repeat(2 * 1024 * 1024),
    );
    expect(big.status).toBe(413);
    expect((await fetch(h.url.replace(/\/$/, '/health/liveness'))).status).toBe(200);
    expect(h.emulator.countRequests()).toBe(0);
  });

  it('answers 503 when the API server keeps failing, so that Knative redelivers', async () => {
    h = await startHarness({ EVENT_DEADLINE_MS: '800' });
    const appId = sparkAppId(3);
    const driver = h.createPod(driverPod({ namespace: NS, appId }));
    const exec = h.createPod(
      executorPod({
        namespace: NS,
        appId,
        execId: '1',
        driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
        blockManagerPort: 7079,
      }),
    );
    h.emulator.faults.add({ resource: 'services', times: Infinity, fault: { kind: 'status', code: 503 } });
    const reply = await h.send('add', exec);
    expect(reply.status).toBe(503);
    expect(reply.text).toMatch(/deadline/);
    expect(h.metrics.retries).toBeGreaterThan(0);
    h.emulator.faults.clear();
    expect((await h.send('add', exec)).type).toBe('spark-exec-svc.service.created');
  });
});

describe('the real entry point (functions/executor-service/main.ts)', () => {
  const entry = fileURLToPath(new URL('../../functions/executor-service/main.ts', import.meta.url));

  function startMain(env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    let output = '';
    const child = spawn(process.execPath, [entry], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    return { child, output: () => output, exited };
  }

  it('refuses to start on invalid configuration, saying why', async () => {
    const main = startMain({ WATCH_NAMESPACES: 'Not_Valid', COOLDOWN_SECONDS: 'soon', PORT: '0' });
    expect(await main.exited).toBe(1);
    expect(main.output()).toMatch(/invalid configuration[\s\S]*WATCH_NAMESPACES[\s\S]*COOLDOWN_SECONDS/);
  });

  it('finishes in-flight events on SIGTERM before exiting', async () => {
    const emulator = await startEmulator();
    const kubeconfig = join(mkdtempSync(join(tmpdir(), 'sxs-main-')), 'config');
    emulator.writeKubeconfig(kubeconfig);
    const port = await freePort();
    const main = startMain({
      KUBECONFIG: kubeconfig,
      PORT: String(port),
      WATCH_NAMESPACES: NS,
      BLOCK_MANAGER_PORT: '7079',
      LOG_LEVEL: 'info',
    });
    try {
      await waitForHttpOk(`http://127.0.0.1:${port}/health/readiness`, { child: main.child });
      const appId = sparkAppId(9);
      const driver = emulator.seed(driverPod({ namespace: NS, appId })) as { metadata: { name: string; uid: string } };
      const exec = emulator.seed(executorPod({ namespace: NS, appId, execId: '1', driver: driver.metadata, blockManagerPort: 7079 }));
      emulator.faults.add({ verb: 'create', resource: 'services', fault: { kind: 'delay', ms: 700 } });
      const inFlight = postCloudEvent(`http://127.0.0.1:${port}/`, { type: podEventType('add'), data: exec });
      await new Promise((r) => setTimeout(r, 250));
      main.child.kill('SIGTERM');
      const reply = await inFlight;
      expect(reply.status).toBe(200);
      expect(reply.type).toBe('spark-exec-svc.service.created');
      expect(await main.exited).toBe(0);
      expect(emulator.listObjects('services', NS)).toHaveLength(1);
      expect(main.output()).toMatch(/"msg":"shutting down"[\s\S]*"msg":"stopped"/);
    } finally {
      main.child.kill('SIGKILL');
      await emulator.stop();
    }
  });
});
