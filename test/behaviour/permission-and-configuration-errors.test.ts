/**
 * Errors an operator must be able to act on: a 403 from the API server names the missing
 * permission (verb, resource, namespace) and is answered 500; invalid configuration stops start-up
 * with every bad variable named, and no namespace scope is guessed.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SERVICE_ACCOUNT_NAMESPACE_FILE } from '../../shared/ops/config.ts';
import { describe, expect, it } from 'vitest';
import { postSweep } from '../../testkit/apiserversource.ts';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, logsMatching, useAudit } from '../support/audited.ts';

useAudit();

describe('a 403 names the missing permission', () => {
  const cases = [
    { verb: 'get', resource: 'pods', trigger: 'add of an executor that opts in through its driver' },
    { verb: 'create', resource: 'services', trigger: 'add' },
    { verb: 'patch', resource: 'services', trigger: 'executor delete (cool-down mark)' },
    { verb: 'delete', resource: 'services', trigger: 'driver finished' },
    { verb: 'list', resource: 'pods', trigger: 'sweep' },
    { verb: 'list', resource: 'services', trigger: 'sweep' },
  ] as const;

  it.each(cases)(
    '403 on $verb $resource ($trigger): answered 500, logged with verb, resource and namespace',
    async ({ verb, resource }) => {
      const h = await audited();
      const appId = sparkAppId(9);
      const driver = h.createPod(driverPod({ namespace: NS, appId, name: 'f-driver' }));
      const exec = h.createPod(
        executorPod({ namespace: NS, appId, execId: '1', name: 'f-exec-1', driver: { name: 'f-driver', uid: driver.metadata.uid! } }),
      );
      if (verb === 'patch' || verb === 'delete') expect((await h.send('add', exec)).type).toBe('spark-exec-svc.service.created');
      h.emulator.faults.add({ verb, resource, fault: { kind: 'status', code: 403 } });
      let reply;
      if (verb === 'get' || verb === 'create') reply = await h.send('add', exec);
      else if (verb === 'patch') {
        h.emulator.deleteObject('pods', NS, exec.metadata.name);
        reply = await h.send('delete', exec);
      } else if (verb === 'delete') {
        h.emulator.patchObject('pods', NS, 'f-driver', { status: { phase: 'Succeeded' } });
        reply = await h.send('update', h.emulator.getObject('pods', NS, 'f-driver') as unknown as PodBody);
      } else reply = await postSweep(h.url);
      expect(reply.status).toBe(500);
      const expected = new RegExp(
        `forbidden: ${verb} ${resource}.* in namespace "${NS}" — the function's ServiceAccount needs RBAC verb "${verb}" on "${resource}"`,
      );
      expect(JSON.parse(reply.text).error).toMatch(expected);
      const lines = logsMatching(h, expected, ['error']);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ msg: 'event failed', status: 500 });
      expect(h.metrics.retries).toBe(0);
    },
  );
});

describe('a ResourceQuota refusal is not reported as a missing permission', () => {
  it('403 "exceeded quota" on create services: answered 500 (final: not retried), logged as a quota refusal naming the quota', async () => {
    const h = await audited();
    const appId = sparkAppId(10);
    const driver = h.createPod(driverPod({ namespace: NS, appId, name: 'q-driver' }));
    const exec = h.createPod(
      executorPod({ namespace: NS, appId, execId: '1', name: 'q-exec-1', driver: { name: 'q-driver', uid: driver.metadata.uid! } }),
    );
    // The real API server's refusal (kube-apiserver v1.34.4, ResourceQuota admission; measured in e2e/scenarios/limits.e2e.ts).
    const refusal =
      'services "svc-q" is forbidden: exceeded quota: spark-services, requested: count/services=1, used: count/services=1, limited: count/services=1';
    h.emulator.faults.add({ verb: 'create', resource: 'services', fault: { kind: 'status', code: 403, message: refusal } });
    const reply = await h.send('add', exec);
    expect(reply.status).toBe(500);
    const error = JSON.parse(reply.text).error as string;
    expect(error).toContain(`refused by a ResourceQuota: create services`);
    expect(error).toContain(`in namespace "${NS}"`);
    expect(error).toContain(refusal);
    expect(error).not.toMatch(/RBAC/);
    expect(logsMatching(h, /refused by a ResourceQuota/, ['error'])).toHaveLength(1);
    expect(h.metrics.retries).toBe(0);
  });
});

describe('configuration errors stop start-up', () => {
  const entry = fileURLToPath(new URL('../../functions/executor-service/main.ts', import.meta.url));
  function run(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
    const clean = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) =>
          !/^(WATCH_NAMESPACES|OPT_IN_MODE|BLOCK_MANAGER_PORT|COOLDOWN_SECONDS|LOG_LEVEL|PORT|EVENT_DEADLINE_MS|REQUEST_TIMEOUT_MS|MAX_BODY_BYTES|SWEEP_PAGE_SIZE)$/.test(
            k,
          ),
      ),
    );
    const child: ChildProcess = spawn(process.execPath, [entry], { env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    return new Promise((resolve) =>
      child.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, output });
      }),
    );
  }

  it('every invalid variable is named in one message, exit code 1, nothing served', async () => {
    const { code, output } = await run({
      WATCH_NAMESPACES: 'spark,Bad_NS',
      OPT_IN_MODE: 'everything',
      BLOCK_MANAGER_PORT: '70000',
      COOLDOWN_SECONDS: '-5',
      EVENT_DEADLINE_MS: '10',
      REQUEST_TIMEOUT_MS: 'soon',
      MAX_BODY_BYTES: '1',
      SWEEP_PAGE_SIZE: '0',
      LOG_LEVEL: 'verbose',
      PORT: '99999',
    });
    expect(code).toBe(1);
    expect(output).toMatch(/^spark-exec-svc: invalid configuration/);
    for (const name of [
      'WATCH_NAMESPACES',
      'OPT_IN_MODE',
      'BLOCK_MANAGER_PORT',
      'COOLDOWN_SECONDS',
      'EVENT_DEADLINE_MS',
      'REQUEST_TIMEOUT_MS',
      'MAX_BODY_BYTES',
      'SWEEP_PAGE_SIZE',
      'LOG_LEVEL',
      'PORT',
    ]) {
      expect(output).toMatch(new RegExp(`\\n  ${name}(\\.\\d+)?: `));
    }
    expect(output).not.toMatch(/"msg":"listening"/);
  });

  it.skipIf(existsSync(SERVICE_ACCOUNT_NAMESPACE_FILE))(
    'no WATCH_NAMESPACES and no in-cluster namespace: refuses to guess a scope',
    async () => {
      const { code, output } = await run({ PORT: '18080' });
      expect(code).toBe(1);
      expect(output).toMatch(/WATCH_NAMESPACES: not set.*set WATCH_NAMESPACES/);
    },
  );
});
