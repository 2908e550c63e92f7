/**
 * dataplane-check.sh on its own: shellcheck, and its verdicts under each POSIX shell against local
 * ports that refuse, time out or answer (docs/dataplanes.md "Reading the verdicts").
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { desiredExecutorService } from '../../../shared/model/service-spec.ts';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../../shared/model/labels.ts';
import {
  ROOT,
  SCRIPT,
  SELECTOR_LABEL,
  SCRIPT_SETTINGS,
  CURL,
  SHELLCHECK,
  SHELLS,
  runScript,
  closedPort,
  fakeCluster,
  verbOf,
  type Json,
  type K8sObject,
  excessPropertyErrors,
  schemaErrors,
} from './support.ts';
// ===========================================================================
// 2. The script against a fake kubectl (no root needed).
describe.skipIf(CURL === undefined)('dataplane-check.sh', () => {
  it.skipIf(SHELLCHECK === undefined)(`passes shellcheck as POSIX sh${SHELLCHECK === undefined ? ' (SKIPPED: no shellcheck)' : ''}`, () => {
    const r = spawnSync(SHELLCHECK!, ['-s', 'sh', SCRIPT], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('docs/dataplanes.md explains how to run it and every verdict', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/dataplanes.md'), 'utf8');
    for (const term of [
      'kubectl apply -k knative/dataplane-check',
      'VERDICT=reject',
      'VERDICT=drop',
      'VERDICT=inconclusive',
      'DELETED_VERDICT',
      'service-no-backend-response',
      'internalTrafficPolicy',
    ]) {
      expect(doc, term).toContain(term);
    }
    for (const name of SCRIPT_SETTINGS.filter((n) => !['KUBECTL', 'CURL'].includes(n))) expect(doc, name).toContain(name);
  });

  describe.each(SHELLS)('under $name', ({ argv: shell }) => {
    const fast = { ATTEMPTS: '2', CONNECT_TIMEOUT_SECONDS: '0.5', PROGRAM_DELAY_SECONDS: '0', CLUSTERIP_WAIT_SECONDS: '3' };

    it("creates a Service that selects no pod, shaped like the function's, probes it, deletes it, probes its old ClusterIP", async () => {
      const port = await closedPort();
      const k = fakeCluster({
        ...fast,
        PORT: String(port),
        FAKE_CLUSTER_IP: '127.0.0.1',
        OWNER_POD_NAME: 'spark-exec-svc-dataplane-check-x7k2p',
        OWNER_POD_UID: '4f2c0a9e-8d1b-4c3e-9f70-1a2b3c4d5e6f',
        NODE_NAME: 'node-1',
      });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        expect(r.verdict).toMatchObject({ verdict: 'reject', attempts: 2, refused: 2, target: `127.0.0.1:${port}` });
        expect(r.deletedVerdict).toMatchObject({ verdict: 'reject', refused: 2 });
        expect(r.stdout).toContain('REJECT: fast fail works');
        expect(r.stdout).toContain('node node-1');
        // create -> get -> delete, each in namespace spark, each bounded by a request timeout.
        const calls = k.calls();
        expect(calls.map(verbOf)).toEqual(['create', 'get', 'delete']);
        for (const c of calls) {
          expect(c).toContain('--request-timeout=10s');
          expect(c.join(' ')).toContain('--namespace spark');
        }
        // The deleted-Service probe came after the delete.
        expect(r.stdout.indexOf('deleted Service')).toBeLessThan(r.stdout.indexOf('DELETED_VERDICT='));
        expect(r.stdout.indexOf('VERDICT=')).toBeLessThan(r.stdout.indexOf('deleted Service'));

        const svc = k.created() as K8sObject & { spec: Json; metadata: Json };
        expect(schemaErrors([svc])).toEqual([]);
        expect(excessPropertyErrors([svc])).toEqual([]);
        const name = svc.metadata.name;
        expect(name).toMatch(/^spark-exec-svc-dataplane-check-[0-9a-f]{8}$/);
        expect(calls[1]).toContain(name);
        expect(calls[2]).toContain(name);
        expect(calls[2]).toContain('--ignore-not-found');
        expect(svc.metadata.namespace).toBe('spark');
        // Selects on a label no pod has: the Service never gets endpoints.
        expect(svc.spec['selector']).toEqual({ [SELECTOR_LABEL]: name.slice(-8) });
        // Not one of the function's Services: its sweep must never adopt or delete it.
        expect((svc.metadata.labels as Record<string, string>)[MANAGED_BY_LABEL]).not.toBe(MANAGED_BY_VALUE);
        // Same type and port shape as the Service the function makes for an executor.
        const fn = desiredExecutorService(
          'spark',
          {
            appId: 'spark-0123456789abcdef0123456789abcdef',
            execId: '1',
            executor: { name: 'e', uid: 'u1' },
            owner: { name: 'd', uid: 'u2' },
          },
          port,
        );
        expect(svc.spec['type']).toBe(fn.spec.type);
        expect(svc.spec['ports']).toEqual(fn.spec.ports);
        expect(svc.spec['internalTrafficPolicy']).toBe('Cluster');
        // Owned by the Job's pod (garbage-collected with it), without blockOwnerDeletion.
        expect(svc.metadata['ownerReferences']).toEqual([
          { apiVersion: 'v1', kind: 'Pod', name: 'spark-exec-svc-dataplane-check-x7k2p', uid: '4f2c0a9e-8d1b-4c3e-9f70-1a2b3c4d5e6f' },
        ]);
      } finally {
        k.dispose();
      }
    });

    it('waits for the ClusterIP; without owner settings the Service has no owner; CHECK_DELETED=false deletes on exit', async () => {
      const port = await closedPort();
      const k = fakeCluster({
        ...fast,
        PORT: String(port),
        FAKE_CLUSTER_IP: '127.0.0.1',
        FAKE_EMPTY_GETS: '2',
        CHECK_DELETED: 'false',
        INTERNAL_TRAFFIC_POLICY: 'Local',
      });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.code).toBe(0);
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'get', 'get', 'delete']);
        expect(r.deletedVerdict).toBeUndefined();
        const svc = k.created() as K8sObject & { spec: Json; metadata: Json };
        expect(svc.metadata['ownerReferences']).toBeUndefined();
        expect(svc.spec['internalTrafficPolicy']).toBe('Local');
        expect(schemaErrors([svc])).toEqual([]);
      } finally {
        k.dispose();
      }
    });

    it('no ClusterIP in time: error, and the Service is deleted', async () => {
      const k = fakeCluster({ ...fast, CLUSTERIP_WAIT_SECONDS: '1', FAKE_CLUSTER_IP: '' });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.code).toBe(1);
        expect(r.stderr).toContain('got no ClusterIP');
        expect(r.verdict).toBeUndefined();
        const verbs = k.calls().map(verbOf);
        expect(verbs[0]).toBe('create');
        expect(verbs.at(-1)).toBe('delete');
        expect(verbs.filter((v) => v === 'delete')).toHaveLength(1);
      } finally {
        k.dispose();
      }
    });

    it("create fails: error with the API's message, and a delete is still tried (the create may have happened)", async () => {
      const k = fakeCluster({ ...fast, FAKE_CREATE_FAIL: '1', FAKE_CLUSTER_IP: '127.0.0.1' });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.code).toBe(1);
        expect(r.stderr).toContain('services is forbidden');
        expect(k.calls().map(verbOf)).toEqual(['create', 'delete']);
        expect(k.calls()[1]).toContain('--ignore-not-found');
      } finally {
        k.dispose();
      }
    });

    it('a failing delete is retried, then reported with the command to run by hand', async () => {
      const port = await closedPort();
      const k = fakeCluster({
        ...fast,
        PORT: String(port),
        FAKE_CLUSTER_IP: '127.0.0.1',
        FAKE_ON_DELETE: 'exit 1',
        OWNER_POD_NAME: 'p',
        OWNER_POD_UID: 'abc-123',
      });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.code).toBe(1); // the deleted-Service probe needs the delete
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'delete', 'delete', 'delete']);
        expect(r.stdout).toContain('WARNING: could not delete Service spark/');
        expect(r.stdout).toContain('garbage collection removes it');
        expect(r.verdict?.verdict).toBe('reject');
      } finally {
        k.dispose();
      }
    });

    it('SIGTERM (Job deadline, pod deletion) deletes the Service at once', async () => {
      const k = fakeCluster({ ...fast, FAKE_CLUSTER_IP: '127.0.0.1', PROGRAM_DELAY_SECONDS: '30' });
      try {
        let signalledAt = 0;
        const r = await runScript({
          shell,
          env: k.env,
          onLine: (line) => {
            if (!line.includes('waiting 30s for the proxy')) return undefined;
            signalledAt = performance.now();
            return 'SIGTERM';
          },
        });
        expect(signalledAt).toBeGreaterThan(0);
        expect(r.code).toBe(143);
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'delete']);
        expect(r.elapsedMs, 'did not sit out the 30 s wait').toBeLessThan(10_000);
        expect(r.verdict).toBeUndefined();
      } finally {
        k.dispose();
      }
    });

    it('refuses bad settings before touching the cluster', async () => {
      const bads: Record<string, string>[] = [
        { INTERNAL_TRAFFIC_POLICY: 'Nodes' },
        { ATTEMPTS: '0' },
        { PORT: '70000' },
        { CONNECT_TIMEOUT_SECONDS: '1s' },
        { FAST_MS: '5000', CONNECT_TIMEOUT_SECONDS: '2' },
        { CHECK_DELETED: 'yes' },
        { NAMESPACE: 'Not_A_Namespace' },
      ];
      for (const bad of bads) {
        const k = fakeCluster({ ...fast, FAKE_CLUSTER_IP: '127.0.0.1', ...bad });
        try {
          const r = await runScript({ shell, env: k.env });
          expect(r.code, JSON.stringify(bad)).toBe(1);
          expect(r.stderr, JSON.stringify(bad)).toMatch(/^dataplane-check: error: /);
          expect(k.calls(), JSON.stringify(bad)).toEqual([]);
        } finally {
          k.dispose();
        }
      }
    });

    it('never connects through an HTTP proxy from the environment', async () => {
      // A "proxy" that accepts everything: through it every connect would succeed.
      const proxy = net.createServer((s) => s.destroy());
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      const proxyUrl = `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
      try {
        const r = await runScript({
          shell,
          args: ['probe', '127.0.0.1', String(await closedPort())],
          env: { ...fast, http_proxy: proxyUrl, HTTP_PROXY: proxyUrl, ALL_PROXY: proxyUrl },
        });
        expect(r.verdict?.verdict).toBe('reject');
        expect(r.code).toBe(0);
      } finally {
        proxy.close();
      }
    });

    it('a listener that accepts is not a refusal: inconclusive, exit 3', async () => {
      const server = net.createServer((s) => s.destroy());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const r = await runScript({ shell, args: ['probe', '127.0.0.1', String((server.address() as net.AddressInfo).port)], env: fast });
        expect(r.verdict).toMatchObject({ verdict: 'inconclusive', other: 2 });
        expect(r.attempts.every((a) => a.reason.startsWith('connected'))).toBe(true);
        expect(r.stdout).toContain('2 connect(s) were ACCEPTED');
        expect(r.code).toBe(3);
      } finally {
        server.close();
      }
    });
  });
});
