/**
 * A scene for races between two function instances on one API server (a slow read on A while B
 * writes): the victim's pods, the events, and the invariant (testkit/oracle.ts) on demand.
 * Unlike ./tenant-scene.ts, an event here is not followed by a check: the races check at the
 * points they are about.
 */
import { expect } from 'vitest';
import { executorServiceName } from '../../../shared/model/naming.ts';
import type { RequestRecord } from '../../../packages/kube-emulator/index.ts';
import { type PostedReply, postSweep } from '../../../testkit/apiserversource.ts';
import type { Harness, HarnessOptions } from '../../../testkit/harness.ts';
import type { Obj as SvcObj } from '../../../testkit/oracle.ts';
import { type PodBody, driverPod, executorPod } from '../../../testkit/spark-pods.ts';
import { NS, audited, sleep } from '../../support/audited.ts';
import { invariantProblemsOf, ref } from './tenant-scene.ts';

export const serviceOf = (h: Harness, name: string): SvcObj | undefined =>
  h.emulator.getObject('services', NS, name) as unknown as SvcObj | undefined;

export async function untilSeen(what: string, cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await sleep(2);
  }
}

export class RaceScene {
  readonly genuine = new Set<string>();
  readonly h: Harness;
  readonly cap: number | undefined;
  constructor(h: Harness, cap?: number) {
    this.h = h;
    this.cap = cap;
  }

  problems(): string[] {
    return invariantProblemsOf(this.h, this.genuine, this.cap);
  }

  check(step: string): void {
    expect(this.problems(), `invariant after: ${step}`).toEqual([]);
  }

  async event(verb: 'add' | 'update' | 'delete', pod: PodBody, to: Harness = this.h): Promise<PostedReply> {
    const reply = await to.send(verb, pod);
    expect(reply.status, `${verb} ${pod.metadata.name}: ${reply.text}`).toBe(200);
    return reply;
  }

  async sweep(to: Harness = this.h): Promise<PostedReply> {
    const reply = await postSweep(to.url, `sweep-${Math.random().toString(36).slice(2)}`);
    expect(reply.status, reply.text).toBe(200);
    return reply;
  }

  driver(appId: string, name: string, uid?: string): PodBody {
    const body = driverPod({ namespace: NS, appId, name });
    return this.h.createPod(uid === undefined ? body : { ...body, metadata: { ...body.metadata, uid } });
  }

  executor(appId: string, execId: string, driver: PodBody, o: { name?: string; port?: number } = {}): PodBody {
    const pod = this.h.createPod(
      executorPod({
        namespace: NS,
        appId,
        execId,
        name: o.name ?? `${driver.metadata.name}-exec-${execId}`,
        driver: ref(driver),
        blockManagerPort: o.port,
      }),
    );
    this.genuine.add(pod.metadata.name);
    return pod;
  }

  /** A genuine executor whose add creates its Service. */
  async started(appId: string, execId: string, driver: PodBody, o: { name?: string; to?: Harness } = {}): Promise<PodBody> {
    const pod = this.executor(appId, execId, driver, o);
    const reply = await this.event('add', pod, o.to);
    expect(
      reply.data?.outcomes.some((x) => x.action === 'created'),
      `add of ${pod.metadata.name}: ${reply.text}`,
    ).toBe(true);
    return pod;
  }
}

export async function raceScene(env: Record<string, string> = {}, opts: HarnessOptions = {}): Promise<RaceScene> {
  const h = await audited(env, opts);
  return new RaceScene(h, env['MAX_SERVICES_PER_NAMESPACE'] === undefined ? undefined : Number(env['MAX_SERVICES_PER_NAMESPACE']));
}

/**
 * The race of finding 1. `trigger` sends, to instance A, an event that names executor slot
 * (appId, execId) while no pod carries its labels: A lists the slot's pods (none), then reads the
 * slot's Service. That read is held 400 ms (a slow API server); meanwhile Spark starts the
 * genuine executor and instance B creates its Service. A's read then returns that Service.
 */
export async function raceSlotRead(
  s: RaceScene,
  b: Harness,
  o: { appId: string; execId: string; driver: PodBody; name?: string; trigger: () => Promise<PostedReply> },
): Promise<{ reply: PostedReply; exec: PodBody }> {
  const { h } = s;
  const svc = executorServiceName(o.appId, o.execId);
  const isRead = (r: RequestRecord): boolean => r.verb === 'get' && r.resource === 'services' && r.name === svc;
  const before = h.emulator.requests.filter(isRead).length;
  h.emulator.faults.add({ verb: 'get', resource: 'services', path: `/services/${svc}`, fault: { kind: 'delay', ms: 400 } });
  const pending = o.trigger();
  await untilSeen(`A reads Service ${svc}`, () => h.emulator.requests.filter(isRead).length > before);
  const exec = await s.started(o.appId, o.execId, o.driver, { name: o.name, to: b });
  s.check(`executor ${exec.metadata.name} started, its Service created by instance B`);
  const reply = await pending;
  expect(reply.status, reply.text).toBe(200);
  h.emulator.faults.clear();
  return { reply, exec };
}
