import { describe, expect, it } from 'vitest';
import { resolveBlockManagerPort } from '../shared/block-manager-port.ts';
import { ConfigError, loadConfig } from '../shared/config.ts';
import { cooldownExpiresAt, isCooldownExpired } from '../shared/cooldown.ts';
import { InvalidEventError, parseFunctionEvent } from '../shared/events.ts';
import { Pod, type Service } from '../shared/k8s-objects.ts';
import { desiredExecutorService, isOurService, serviceDriftPatch } from '../shared/service-spec.ts';
import { classifySparkPod } from '../shared/spark-pod.ts';
import { planSweep } from '../shared/sweep-plan.ts';
import { driverPod, executorPod, nonSparkPod, sparkAppId } from './support/spark-pods.ts';

const ns = 'spark';
const appId = sparkAppId(7);
const driver = { name: 'pi-driver', uid: 'd-uid-1' };
const parsePod = (body: unknown) => Pod.parse(body);
const withUid = <T extends { metadata: object }>(body: T, uid: string): T => ({ ...body, metadata: { ...body.metadata, uid } });

describe('config', () => {
  it('parses defaults and lists every invalid value at once', () => {
    const config = loadConfig({ WATCH_NAMESPACES: 'a, b,a' }, () => undefined);
    expect(config.namespaces).toEqual(['a', 'b']);
    expect(config.cooldownSeconds).toBe(300);
    expect(config.optInMode).toBe('label');
    expect(config.defaultBlockManagerPort).toBeUndefined();
    expect(() => loadConfig({ WATCH_NAMESPACES: 'A_B', COOLDOWN_SECONDS: '-1', OPT_IN_MODE: 'some', BLOCK_MANAGER_PORT: '70000' }, () => undefined)).toThrow(
      /WATCH_NAMESPACES[\s\S]*OPT_IN_MODE[\s\S]*BLOCK_MANAGER_PORT[\s\S]*COOLDOWN_SECONDS/,
    );
  });

  it('falls back to the service-account namespace, and fails clearly without one', () => {
    expect(loadConfig({}, () => 'spark-jobs\n').namespaces).toEqual(['spark-jobs']);
    expect(() => loadConfig({}, () => undefined)).toThrow(ConfigError);
    expect(() => loadConfig({}, () => undefined)).toThrow(/WATCH_NAMESPACES: not set/);
  });
});

describe('event parsing', () => {
  const base = { id: '1', source: 'https://10.96.0.1:443' };

  it('reads Resource-mode pod events, Reference-mode references and PingSource sweeps', () => {
    const exec = withUid(executorPod({ namespace: ns, appId, execId: '1', driver }), 'e1');
    const parsed = parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: exec });
    expect(parsed.kind).toBe('pod');
    expect(parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.ref.delete', data: { apiVersion: 'v1', kind: 'Pod', name: 'p', namespace: ns } })).toEqual({
      kind: 'pod-ref',
      verb: 'delete',
      namespace: ns,
      name: 'p',
    });
    expect(parseFunctionEvent({ ...base, type: 'dev.knative.sources.ping', data: { action: 'sweep' } })).toEqual({ kind: 'sweep' });
    expect(parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: JSON.stringify(exec) }).kind).toBe('pod');
  });

  it('ignores non-Spark pods and other kinds without validating them', () => {
    expect(parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: nonSparkPod(ns, 'web') }).kind).toBe('ignored');
    expect(parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: { kind: 'ConfigMap', metadata: {} } }).kind).toBe('ignored');
    expect(parseFunctionEvent({ ...base, type: 'com.example.other', data: {} }).kind).toBe('ignored');
  });

  it('rejects payloads that no API server could have sent', () => {
    const hostile = withUid(executorPod({ namespace: ns, appId: 'x"; rm -rf /', execId: '1', driver }), 'e1');
    expect(() => parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: hostile })).toThrow(InvalidEventError);
    const longLabel = withUid(executorPod({ namespace: ns, appId: 'a'.repeat(64), execId: '1', driver }), 'e1');
    expect(() => parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: longLabel })).toThrow(/invalid value for label/);
    expect(() => parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: '{not json' })).toThrow(/not a JSON object/);
    expect(() => parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.ref.add', data: { name: 'x' } })).toThrow(/object reference/);
    const noUid = executorPod({ namespace: ns, appId, execId: '1', driver });
    expect(() => parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: noUid })).toThrow(/uid/);
  });
});

describe('block-manager port', () => {
  it('prefers the annotation, then SPARK_JAVA_OPT_<n>, then the default', () => {
    const fromEnv = parsePod(executorPod({ namespace: ns, appId, execId: '1', driver, blockManagerPort: 7079 }));
    expect(resolveBlockManagerPort(fromEnv, 1234)).toEqual({ ok: true, port: 7079, source: 'spark-java-opt' });
    const annotated = parsePod({ ...executorPod({ namespace: ns, appId, execId: '1', driver, blockManagerPort: 7079 }) });
    annotated.metadata.annotations = { 'spark-exec-svc/block-manager-port': '7100' };
    expect(resolveBlockManagerPort(annotated, 1234)).toEqual({ ok: true, port: 7100, source: 'annotation' });
    const bare = parsePod(executorPod({ namespace: ns, appId, execId: '1', driver }));
    expect(resolveBlockManagerPort(bare, 1234)).toEqual({ ok: true, port: 1234, source: 'default' });
    expect(resolveBlockManagerPort(bare, undefined)).toMatchObject({ ok: false });
    annotated.metadata.annotations = { 'spark-exec-svc/block-manager-port': '99999' };
    expect(resolveBlockManagerPort(annotated, 1234)).toMatchObject({ ok: false, reason: expect.stringContaining('not a port') });
  });
});

describe('Service spec', () => {
  const desired = desiredExecutorService({ namespace: ns, appId, execId: '3', executorPodName: 'e-3', driver: { namespace: ns, ...driver }, port: 7079 });

  it('is shaped as Spark’s own per-executor Service', () => {
    expect(desired.metadata.name).toBe(`svc-${appId}-exec-3`);
    expect(desired.spec).toEqual({
      type: 'ClusterIP',
      selector: { 'spark-app-selector': appId, 'spark-exec-id': '3' },
      ports: [{ name: 'spark-block-manager', protocol: 'TCP', port: 7079, targetPort: 7079 }],
    });
    expect(desired.metadata.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'Pod', name: driver.name, uid: driver.uid, controller: true }]);
    expect(JSON.stringify(desired)).not.toContain('blockOwnerDeletion');
  });

  it('detects drift and patches only what differs', () => {
    const existing: Service = JSON.parse(JSON.stringify(desired)) as Service;
    expect(serviceDriftPatch(existing, desired)).toBeUndefined();
    existing.spec!.ports = [{ name: 'spark-block-manager', port: 7000, targetPort: 7000, protocol: 'TCP' }];
    existing.metadata.ownerReferences = [{ apiVersion: 'v1', kind: 'Pod', name: 'old', uid: 'old-uid' }];
    expect(serviceDriftPatch(existing, desired)).toEqual({
      metadata: { ownerReferences: desired.metadata.ownerReferences },
      spec: { ports: desired.spec.ports },
    });
  });

  it('knows its own Services from foreign ones', () => {
    const ours = JSON.parse(JSON.stringify(desired)) as Service;
    expect(isOurService(ours)).toBe(true);
    const foreign = { ...ours, metadata: { ...ours.metadata, labels: {} } };
    expect(isOurService(foreign)).toBe(false);
  });
});

describe('cool-down', () => {
  const svc = (goneAt?: string): Service =>
    ({ metadata: { name: 's', namespace: ns, annotations: goneAt === undefined ? {} : { 'spark-exec-svc/executor-gone-at': goneAt } } }) as Service;
  it('expires the configured seconds after the executor went; 0 keeps it', () => {
    const now = new Date('2026-12-02T12:10:00Z');
    expect(isCooldownExpired(svc('2026-12-02T12:04:59Z'), now, 300)).toBe(true);
    expect(isCooldownExpired(svc('2026-12-02T12:05:01Z'), now, 300)).toBe(false);
    expect(isCooldownExpired(svc('2026-12-02T00:00:00Z'), now, 0)).toBe(false);
    expect(isCooldownExpired(svc(), now, 300)).toBe(false);
    expect(isCooldownExpired(svc('garbage'), now, 300)).toBe(false);
    expect(cooldownExpiresAt(svc('2026-12-02T12:00:00Z'), 300)?.toISOString()).toBe('2026-12-02T12:05:00.000Z');
  });
});

describe('classification and sweep plan', () => {
  const config = loadConfig({ WATCH_NAMESPACES: ns, BLOCK_MANAGER_PORT: '7079' }, () => undefined);
  const driverBody = parsePod(withUid(driverPod({ namespace: ns, appId, name: driver.name }), driver.uid));

  it('classifies Spark pods by their labels', () => {
    expect(classifySparkPod(driverBody)?.role).toBe('driver');
    const exec = classifySparkPod(parsePod(withUid(executorPod({ namespace: ns, appId, execId: '2', driver }), 'e2')));
    expect(exec).toMatchObject({ role: 'executor', appId, execId: '2', driver: { name: driver.name, uid: driver.uid } });
    expect(classifySparkPod(parsePod(nonSparkPod(ns, 'x')))).toBeUndefined();
  });

  it('plans: create missing, mark gone, delete strays and expired, leave foreign alone', () => {
    const live = parsePod(withUid(executorPod({ namespace: ns, appId, execId: '1', driver }), 'e1'));
    const svcFor = (execId: string, extra: Partial<Service['metadata']> = {}): Service =>
      ({
        ...desiredExecutorService({ namespace: ns, appId, execId, executorPodName: `e-${execId}`, driver: { namespace: ns, ...driver }, port: 7079 }),
        metadata: {
          ...desiredExecutorService({ namespace: ns, appId, execId, executorPodName: `e-${execId}`, driver: { namespace: ns, ...driver }, port: 7079 }).metadata,
          uid: `s${execId}`,
          ...extra,
        },
      }) as Service;
    const goneNoMark = svcFor('2');
    const expired = svcFor('3', { annotations: { 'spark-exec-svc/executor-gone-at': '2000-01-01T00:00:00Z' } });
    const stray = svcFor('4', { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'dead', uid: 'dead-uid' }] });
    const foreign = { metadata: { name: 'svc-x', namespace: ns, labels: {} } } as Service;
    const steps = planSweep({ executors: [live], drivers: [driverBody], services: [goneNoMark, expired, stray, foreign] }, config, new Date());
    expect(steps.map((s) => `${s.kind}:${s.kind === 'ensure' ? s.executor.execId : s.service.metadata.name}`).sort()).toEqual(
      [`ensure:1`, `mark-gone:${goneNoMark.metadata.name}`, `delete:${expired.metadata.name}`, `delete:${stray.metadata.name}`].sort(),
    );
  });
});

describe('bounded caches', () => {
  it('BoundedLru forgets the least recently used entry past its capacity', async () => {
    const { BoundedLru } = await import('../shared/bounded-lru.ts');
    const lru = new BoundedLru<number>(2);
    lru.set('a', 1);
    lru.set('b', 2);
    expect(lru.get('a')).toBe(1); // a is now the most recent
    lru.set('c', 3);
    expect(lru.get('b')).toBeUndefined();
    expect(lru.get('a')).toBe(1);
    expect(lru.get('c')).toBe(3);
    expect(lru.size).toBe(2);
    expect(() => new BoundedLru(0)).toThrow(RangeError);
  });

  it('LiveDriverCache answers only within its time-to-live', async () => {
    const { LiveDriverCache } = await import('../shared/reconcile/driver-lookup.ts');
    const cache = new LiveDriverCache(10, 1000);
    const pod = Pod.parse(withUid(driverPod({ namespace: ns, appId, name: 'd' }), 'u1'));
    cache.remember('u1', pod, 5000);
    expect(cache.recent('u1', 5999)).toBe(pod);
    expect(cache.recent('u1', 6000)).toBeUndefined();
    expect(cache.recent('u1', 5500)).toBeUndefined(); // expired entries are dropped
    cache.remember('u1', pod, 7000);
    cache.markGone('u1');
    cache.remember('u1', pod, 7001); // a read that started before the driver went
    expect(cache.recent('u1', 7002)).toBeUndefined();
    expect(cache.isGone('u1')).toBe(true);
  });
});
