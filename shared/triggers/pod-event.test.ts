/**
 * The engine as rows (knative/pkg reconciler/testing TableRow): the world the API server holds and
 * one pod event in → the exact writes made and the event's headline out. Expectations come from
 * README "How it works" and docs/reliability.md (the rule table and "Facts, not events"); the API
 * is a small in-memory fake written here (labels, preconditions), not the project's emulator.
 */
import { describe, expect, it } from 'vitest';
import type { ReconcileContext } from '../engine/context.ts';
import { FactCache } from '../engine/memory.ts';
import type { KubeClient, Page } from '../kube/client.ts';
import type { Verb } from '../model/events.ts';
import { Pod, type Service } from '../model/k8s-objects.ts';
import type { ServiceBody } from '../model/service-spec.ts';
import type { Config } from '../ops/config.ts';
import { reconcileEvent } from './route.ts';

const NS = 'spark';
const APP = 'spark-0123456789abcdef';
const GONE_AT = 'spark-exec-svc/executor-gone-at';

interface PodSpec {
  readonly name: string;
  readonly role: 'driver' | 'executor';
  readonly execId?: string;
  readonly phase?: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
  readonly optIn?: boolean;
  readonly owner?: { name: string; uid: string } | undefined;
}

const DRIVER = { name: 'app-driver', uid: 'uid-app-driver' };

function pod(spec: PodSpec): Pod {
  const labels: Record<string, string> = { 'spark-role': spec.role, 'spark-app-selector': APP };
  if (spec.execId !== undefined) labels['spark-exec-id'] = spec.execId;
  if (spec.optIn === true) labels['spark-exec-svc/enabled'] = 'true';
  return Pod.parse({
    metadata: {
      name: spec.name,
      namespace: NS,
      uid: `uid-${spec.name}`,
      resourceVersion: '1',
      labels,
      ...(spec.owner === undefined
        ? {}
        : { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: spec.owner.name, uid: spec.owner.uid, controller: true }] }),
    },
    spec: { containers: [{ name: 'c', env: [{ name: 'SPARK_JAVA_OPT_1', value: '-Dspark.blockManager.port=7079' }] }] },
    status: { phase: spec.phase ?? 'Running' },
  });
}

const driver = (phase: PodSpec['phase'] = 'Running'): Pod => pod({ ...DRIVER, role: 'driver', optIn: true, phase });
const executor = (execId: string, extra: Partial<PodSpec> = {}): Pod =>
  pod({ name: `app-exec-${execId}`, role: 'executor', execId, owner: DRIVER, ...extra });

/** Label selectors as the API server reads them: `k=v` and `k in (a,b)`, comma-joined. */
function matches(labels: Record<string, string> | undefined, selector: string): boolean {
  const terms = selector.match(/[^,(]+(?:\([^)]*\))?/g) ?? [];
  return terms.every((term) => {
    const inSet = /^\s*(\S+)\s+in\s+\(([^)]*)\)\s*$/.exec(term);
    if (inSet !== null) return inSet[2]!.split(',').includes(labels?.[inSet[1]!] ?? '\u0000');
    const [key, value] = term.split('=');
    return labels?.[key!.trim()] === value!.trim();
  });
}

/** The API server, in memory: pods and Services by name, every request recorded, writes with their preconditions. */
class FakeApi implements KubeClient {
  readonly pods = new Map<string, Pod>();
  readonly services = new Map<string, Service>();
  readonly requests: string[] = [];
  readonly writes: string[] = [];
  private version = 100;

  async readPod(_ns: string, name: string): Promise<Pod | undefined> {
    this.requests.push(`get pods ${name}`);
    return this.pods.get(name);
  }
  async listPods(_ns: string, selector: string): Promise<Page<Pod>> {
    this.requests.push('list pods');
    return { items: [...this.pods.values()].filter((p) => matches(p.metadata.labels, selector)), continueToken: undefined, skipped: [] };
  }
  async readService(_ns: string, name: string): Promise<Service | undefined> {
    this.requests.push(`get services ${name}`);
    return this.services.get(name);
  }
  async listServices(_ns: string, selector: string): Promise<Page<Service>> {
    this.requests.push('list services');
    return {
      items: [...this.services.values()].filter((s) => matches(s.metadata.labels, selector)),
      continueToken: undefined,
      skipped: [],
    };
  }
  async createService(body: ServiceBody): Promise<{ outcome: 'created'; service: Service } | { outcome: 'exists' }> {
    this.requests.push(`create services ${body.metadata.name}`);
    if (this.services.has(body.metadata.name)) return { outcome: 'exists' };
    const service = {
      ...body,
      metadata: { ...body.metadata, uid: `uid-${body.metadata.name}`, resourceVersion: String(++this.version) },
    } as unknown as Service;
    this.services.set(body.metadata.name, service);
    this.writes.push(`create ${body.metadata.name}`);
    return { outcome: 'created', service };
  }
  async patchService(_ns: string, name: string, patch: Record<string, unknown>): Promise<Service | 'not-found' | 'conflict'> {
    this.requests.push(`patch services ${name}`);
    const service = this.services.get(name);
    if (service === undefined) return 'not-found';
    const metadata = patch['metadata'] as { resourceVersion?: string; annotations?: Record<string, string | null> } | undefined;
    if (metadata?.resourceVersion !== undefined && metadata.resourceVersion !== service.metadata.resourceVersion) return 'conflict';
    const annotations = { ...service.metadata.annotations };
    for (const [key, value] of Object.entries(metadata?.annotations ?? {})) {
      if (value === null) delete annotations[key];
      else annotations[key] = value;
    }
    const patched = { ...service, metadata: { ...service.metadata, annotations, resourceVersion: String(++this.version) } } as Service;
    this.services.set(name, patched);
    this.writes.push(
      `patch ${name} ${Object.entries(metadata?.annotations ?? {})
        .map(([k, v]) => `${k}=${v === null ? 'null' : 'set'}`)
        .join(' ')}`.trim(),
    );
    return patched;
  }
  async deleteService(_ns: string, name: string, uid: string): Promise<'deleted' | 'not-found' | 'precondition-failed'> {
    this.requests.push(`delete services ${name}`);
    const service = this.services.get(name);
    if (service === undefined) return 'not-found';
    if (service.metadata.uid !== uid) return 'precondition-failed';
    this.services.delete(name);
    this.writes.push(`delete ${name}`);
    return 'deleted';
  }
}

const CONFIG = {
  namespaces: [NS],
  optInMode: 'label',
  defaultBlockManagerPort: undefined,
  cooldownSeconds: 300,
  eventDeadlineMs: 1500,
  sweepDeadlineMs: 20_000,
  sweepPageSize: 500,
  maxServicesPerNamespace: 2000,
  maxServicesRecountMargin: 200,
  maxServicesPerApplication: 1000,
  factTtlMs: 10_000,
} as unknown as Config;

interface Row {
  readonly name: string;
  readonly world: readonly Pod[];
  /** Events the same process handled before (its memory), with the world changes after each. */
  readonly before?: ReadonlyArray<{ verb: Verb; pod: Pod; then?: (api: FakeApi) => void }>;
  readonly event: { verb: Verb; pod: Pod };
  readonly writes: readonly string[];
  readonly headline: string;
}

const svc = (execId: string): string => `svc-${APP}-exec-${execId}`;

const ROWS: readonly Row[] = [
  {
    name: 'an executor added, running, its driver runs and opted in: its Service is created',
    world: [driver(), executor('1')],
    event: { verb: 'add', pod: executor('1') },
    writes: [`create ${svc('1')}`],
    headline: 'created',
  },
  {
    name: 'an add whose batch runs with it: one list serves the batch, every claimed slot gets its Service',
    world: [driver(), executor('1'), executor('2'), executor('3')],
    event: { verb: 'add', pod: executor('1') },
    writes: [`create ${svc('1')}`, `create ${svc('2')}`, `create ${svc('3')}`],
    headline: 'created',
  },
  {
    name: 'an add whose driver is gone: no Service (skipped)',
    world: [executor('1')],
    event: { verb: 'add', pod: executor('1') },
    writes: [],
    headline: 'skipped',
  },
  {
    name: 'an add of an application that did not opt in (label mode): nothing (ignored)',
    world: [pod({ ...DRIVER, role: 'driver' }), executor('1')],
    event: { verb: 'add', pod: executor('1') },
    writes: [],
    headline: 'ignored',
  },
  {
    name: 'an add the API server does not confirm (the pod is not there): nothing is made for a claim',
    world: [driver()],
    event: { verb: 'add', pod: executor('1') },
    writes: [],
    headline: 'verified',
  },
  {
    name: 'an executor deleted: its Service is marked gone (the cool-down starts)',
    world: [driver(), executor('1')],
    before: [{ verb: 'add', pod: executor('1'), then: (api) => api.pods.delete('app-exec-1') }],
    event: { verb: 'delete', pod: executor('1') },
    writes: [`patch ${svc('1')} ${GONE_AT}=set`],
    headline: 'marked-gone',
  },
  {
    name: 'a forged "executor failed" event for an executor that runs: no write',
    world: [driver(), executor('1')],
    before: [{ verb: 'add', pod: executor('1') }],
    event: { verb: 'update', pod: executor('1', { phase: 'Failed' }) },
    writes: [],
    headline: 'verified',
  },
  {
    name: 'a no-op status update that agrees with what the process read: no request at all',
    world: [driver(), executor('1')],
    before: [{ verb: 'add', pod: executor('1') }],
    event: { verb: 'update', pod: executor('1') },
    writes: [],
    headline: 'verified',
  },
  {
    name: 'the driver finished (Succeeded, the pod stays): its Services are deleted',
    world: [driver(), executor('1'), executor('2')],
    before: [{ verb: 'add', pod: executor('1'), then: (api) => api.pods.set(DRIVER.name, driver('Succeeded')) }],
    event: { verb: 'update', pod: driver('Succeeded') },
    writes: [`delete ${svc('1')}`, `delete ${svc('2')}`],
    headline: 'deleted',
  },
  {
    // Issue 17, class 6: a driver opted in late sends an update; a process that remembers nothing
    // of it cannot tell a late opt-in from status churn, so its running executors are looked at.
    name: 'a running, opted-in driver’s update in a process that remembers nothing of it: its running executors are looked at → the missing Service made',
    world: [driver(), executor('1')],
    event: { verb: 'update', pod: driver() },
    writes: [`create ${svc('1')}`],
    headline: 'created',
  },
  {
    name: 'a running driver’s update, remembered opted in (read for its executor’s add): nothing to do',
    world: [driver(), executor('1')],
    before: [{ verb: 'add', pod: executor('1') }],
    event: { verb: 'update', pod: driver() },
    writes: [],
    headline: 'ignored',
  },
  {
    name: 'a driver not running yet: nothing to do',
    world: [driver('Pending'), executor('1', { phase: 'Pending' })],
    event: { verb: 'add', pod: driver('Pending') },
    writes: [],
    headline: 'ignored',
  },
];

describe('a pod event, from the world before to the writes made', () => {
  it.each(ROWS.map((row) => [row.name, row] as const))('%s', async (_name, row) => {
    const api = new FakeApi();
    for (const p of row.world) api.pods.set(p.metadata.name, p);
    let clock = Date.parse('2026-12-03T12:00:00Z');
    const ctx: ReconcileContext = {
      client: api,
      config: CONFIG,
      now: () => new Date(clock),
      log: { debug() {}, info() {}, warn() {}, error() {} },
      facts: new FactCache(),
    };
    for (const step of row.before ?? []) {
      await reconcileEvent(ctx, { kind: 'pod', verb: step.verb, pod: step.pod });
      step.then?.(api);
      clock += 1_000;
    }
    api.writes.length = 0;
    api.requests.length = 0;
    const result = await reconcileEvent(ctx, { kind: 'pod', verb: row.event.verb, pod: row.event.pod });
    expect(api.writes.sort()).toEqual([...row.writes].sort());
    expect(result.action, JSON.stringify(result)).toBe(row.headline);
    if (row.name.startsWith('a no-op')) expect(api.requests).toEqual([]);
  });
});
