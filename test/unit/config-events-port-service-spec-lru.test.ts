import { describe, expect, it } from 'vitest';
import { resolveBlockManagerPort } from '../../shared/model/block-manager-port.ts';
import { ConfigError, loadConfig } from '../../shared/ops/config.ts';
import { InvalidEventError, parseFunctionEvent } from '../../shared/model/events.ts';
import { Pod, type Service } from '../../shared/model/k8s-objects.ts';
import { desiredExecutorService, serviceFact } from '../../shared/model/service-spec.ts';
import { executorPod, nonSparkPod, sparkAppId } from '../../testkit/spark-pods.ts';

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
    expect(() =>
      loadConfig({ WATCH_NAMESPACES: 'A_B', COOLDOWN_SECONDS: '-1', OPT_IN_MODE: 'some', BLOCK_MANAGER_PORT: '70000' }, () => undefined),
    ).toThrow(/WATCH_NAMESPACES[\s\S]*OPT_IN_MODE[\s\S]*BLOCK_MANAGER_PORT[\s\S]*COOLDOWN_SECONDS/);
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
    expect(
      parseFunctionEvent({
        ...base,
        type: 'dev.knative.apiserver.ref.delete',
        data: { apiVersion: 'v1', kind: 'Pod', name: 'p', namespace: ns },
      }),
    ).toEqual({
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
    expect(
      parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: { kind: 'ConfigMap', metadata: {} } }).kind,
    ).toBe('ignored');
    expect(parseFunctionEvent({ ...base, type: 'com.example.other', data: {} }).kind).toBe('ignored');
  });

  it('rejects payloads that no API server could have sent', () => {
    const hostile = withUid(executorPod({ namespace: ns, appId: 'x"; rm -rf /', execId: '1', driver }), 'e1');
    expect(() => parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: hostile })).toThrow(InvalidEventError);
    const longLabel = withUid(executorPod({ namespace: ns, appId: 'a'.repeat(64), execId: '1', driver }), 'e1');
    expect(() => parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: longLabel })).toThrow(
      /invalid value for label/,
    );
    expect(() => parseFunctionEvent({ ...base, type: 'dev.knative.apiserver.resource.add', data: '{not json' })).toThrow(
      /not a JSON object/,
    );
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
    const twice = parsePod(executorPod({ namespace: ns, appId, execId: '1', driver, blockManagerPort: 7079 }));
    twice.spec!.containers[0]!.env!.push({ name: 'SPARK_JAVA_OPT_10', value: '-Dspark.blockManager.port=7080' });
    expect(resolveBlockManagerPort(twice, 1234)).toMatchObject({ ok: false, reason: expect.stringContaining('several different values') });
    twice.spec!.containers[0]!.env!.push({ name: 'SPARK_JAVA_OPT_11', value: '-Dspark.blockManager.port=7079' });
    twice.spec!.containers[0]!.env!.splice(-2, 1);
    expect(resolveBlockManagerPort(twice, 1234)).toEqual({ ok: true, port: 7079, source: 'spark-java-opt' });
    annotated.metadata.annotations = { 'spark-exec-svc/block-manager-port': '99999' };
    expect(resolveBlockManagerPort(annotated, 1234)).toMatchObject({ ok: false, reason: expect.stringContaining('not a port') });
  });
});

describe('Service spec', () => {
  const identity = { appId, execId: '3', executor: { name: 'e-3', uid: 'e-uid-3' }, owner: driver };
  const desired = desiredExecutorService(ns, identity, 7079);

  it('is shaped as Spark’s own per-executor Service, and records whose it is', () => {
    expect(desired.metadata.name).toBe(`svc-${appId}-exec-3`);
    expect(desired.spec).toEqual({
      type: 'ClusterIP',
      selector: { 'spark-app-selector': appId, 'spark-exec-id': '3' },
      ports: [{ name: 'spark-block-manager', protocol: 'TCP', port: 7079, targetPort: 7079 }],
    });
    expect(desired.metadata.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Pod', name: driver.name, uid: driver.uid, controller: true },
    ]);
    expect(desired.metadata.annotations).toEqual({
      'spark-exec-svc/executor-pod': 'e-3',
      'spark-exec-svc/executor-uid': 'e-uid-3',
      'spark-exec-svc/driver-pod': driver.name,
    });
    expect(JSON.stringify(desired)).not.toContain('blockOwnerDeletion');
  });

  it('reads back the identity of our Services only', () => {
    const stored = {
      ...structuredClone(desired),
      metadata: { ...structuredClone(desired.metadata), uid: 's-uid', resourceVersion: '7' },
    } as Service;
    expect(serviceFact(stored)?.identity).toEqual(identity);
    const foreign = { ...stored, metadata: { ...stored.metadata, labels: {} } };
    expect(serviceFact(foreign)?.identity).toBeUndefined();
    const twoOwners = {
      ...stored,
      metadata: {
        ...stored.metadata,
        ownerReferences: [...stored.metadata.ownerReferences!, { apiVersion: 'v1', kind: 'Pod', name: 'x', uid: 'x' }],
      },
    };
    expect(serviceFact(twoOwners)?.identity).toBeUndefined();
    const noUid = { ...stored, metadata: { ...stored.metadata, annotations: { 'spark-exec-svc/executor-pod': 'e-3' } } };
    expect(serviceFact(noUid)).toMatchObject({ ours: true, identity: undefined, executor: undefined });
  });
});

describe('bounded caches', () => {
  it('BoundedLru forgets the least recently used entry past its capacity', async () => {
    const { BoundedLru } = await import('../../shared/ops/bounded-lru.ts');
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

  it('BoundedLru also forgets past its byte budget, and keeps nothing larger than the budget', async () => {
    const { BoundedLru } = await import('../../shared/ops/bounded-lru.ts');
    const lru = new BoundedLru<string>(100, 100, (_key, value) => value.length);
    lru.set('a', 'x'.repeat(40));
    lru.set('b', 'x'.repeat(40));
    lru.set('c', 'x'.repeat(40)); // 120 > 100: a goes
    expect(lru.get('a')).toBeUndefined();
    expect(lru.bytes).toBe(80);
    lru.set('huge', 'x'.repeat(101));
    expect(lru.get('huge')).toBeUndefined();
    expect(lru.evictions).toBe(1);
  });
});
