/**
 * Idempotency and order-independence, as a seeded property over generated Spark application
 * lifecycles: every event delivered 1–3 times in any order (delete before add, update after
 * delete, …) ends in exactly the Services a correct system must have, with foreign Services
 * untouched. PROPERTY_RUNS / PROPERTY_SEED widen or reproduce a run (the seed of a failing
 * lifecycle is printed).
 */
import { describe, expect, it } from 'vitest';
import {
  type AppPlan,
  type RecordedEvent,
  World,
  chance,
  deliver,
  deliveryOrder,
  expectedServicesOf,
  planApps,
  rngFrom,
  seedForeignServices,
  shuffle,
} from '../model/world.ts';
import { postSweep } from '../../testkit/apiserversource.ts';
import { convergenceProblems } from '../../testkit/oracle.ts';
import { NS, addForeign, auditAndClose, audited, useAudit } from '../support/audited.ts';
import type { PodBody } from '../../testkit/spark-pods.ts';

useAudit();

const RUNS = Number(process.env['PROPERTY_RUNS'] ?? 25);
const BASE_SEED = Number(process.env['PROPERTY_SEED'] ?? 20_260_401);
const INTERLEAVED_OFFSET = 100_000;
const WATCHED = [NS, 'spark-b'];
const UNWATCHED = ['other'];
const ENV = {
  WATCH_NAMESPACES: WATCHED.join(','),
  COOLDOWN_SECONDS: String(7 * 24 * 3600),
  OPT_IN_MODE: 'label',
  BLOCK_MANAGER_PORT: '7079',
};

function describePlan(apps: readonly AppPlan[]): string {
  return apps
    .map(
      (a) =>
        `${a.appId}@${a.namespace} driver:${a.driverFate}${a.driverOptIn ? '+optin' : ''} [${a.executors.map((e) => `${e.execId}:${e.fate}${e.optIn ? '+optin' : ''}${e.lateOptIn ? '+late' : ''}${e.ownerRef ? '' : '-noowner'}`).join(' ')}]`,
    )
    .join('\n  ');
}

/**
 * One lifecycle run. `interleaved`: deliveries happen between the state changes (an event is
 * only ever delivered after the change that caused it), the rest at the end.
 */
async function runLifecycle(seed: number, interleaved: boolean): Promise<void> {
  const rng = rngFrom(seed);
  const h = await audited(ENV);
  const apps = planApps(rng, 1 + Math.floor(rng() * 4), { watched: WATCHED, unwatched: UNWATCHED, prefix: `s${seed % 1000}x` });
  const foreign = seedForeignServices(h.emulator, apps, rng, `f${seed % 1000}`);
  addForeign(h.emulator, foreign);
  const world = new World(h.emulator, `ev-${seed}`);
  const failures: string[] = [];
  const send = async (event: RecordedEvent): Promise<void> => {
    const reply = await deliver(h.url, event);
    if (reply.status !== 200) failures.push(`${event.id} ${event.verb} ${event.pod.metadata.name}: ${reply.status} ${reply.text}`);
  };

  if (interleaved) {
    const pending: RecordedEvent[] = [];
    await world.runAll(apps, rng, async (recorded) => {
      for (const e of recorded) for (let c = 1 + Math.floor(rng() * 3); c > 0; c--) pending.push(e);
      // Deliver a random part of what is pending now, in random order.
      const now = shuffle(rng, pending.splice(0)).filter((e) => {
        if (chance(rng, 0.5)) return true;
        pending.push(e);
        return false;
      });
      for (const e of now) await send(e);
    });
    for (const e of shuffle(rng, pending)) await send(e);
  } else {
    world.runAll(apps, rng);
    for (const e of deliveryOrder(rng, world.events)) await send(e);
  }

  const context = `seed ${seed} (${interleaved ? 'interleaved' : 'after all changes'}); reproduce with PROPERTY_SEED=${interleaved ? seed - INTERLEAVED_OFFSET : seed} PROPERTY_RUNS=1\n  ${describePlan(apps)}`;
  expect(failures, context).toEqual([]);
  const expected = expectedServicesOf(world, WATCHED, 7079);
  expect(convergenceProblems(h.emulator, expected, [...WATCHED, ...UNWATCHED], foreign), context).toEqual([]);
  // Nothing from an unwatched namespace reached the API (the audit checks every request too).
  expect(
    h.emulator.requests.filter((r) => r.namespace !== undefined && UNWATCHED.includes(r.namespace)),
    context,
  ).toEqual([]);
  // The sweep agrees: nothing left to repair (it only reports the squatted name again, without writing).
  const swept = await postSweep(h.url);
  expect(swept.status, context).toBe(200);
  expect(
    swept.data?.outcomes.filter((o) => o.action !== 'conflict'),
    context,
  ).toEqual([]);
  expect(convergenceProblems(h.emulator, expected, [...WATCHED, ...UNWATCHED], foreign), context).toEqual([]);
  await auditAndClose(h);
}

/** Generous per-test timeout: PROPERTY_RUNS may be raised for a soak. */
const TIMEOUT = Math.max(30_000, RUNS * 2_000);

describe('idempotency property: duplicated, shuffled deliveries converge', () => {
  it(
    `${RUNS} generated lifecycles, every event delivered 1–3 times in random order after all changes`,
    async () => {
      for (let i = 0; i < RUNS; i++) await runLifecycle(BASE_SEED + i, false);
    },
    TIMEOUT,
  );

  it(
    `${RUNS} generated lifecycles, deliveries interleaved with the state changes`,
    async () => {
      for (let i = 0; i < RUNS; i++) await runLifecycle(BASE_SEED + INTERLEAVED_OFFSET + i, true);
    },
    TIMEOUT,
  );
});

describe('what remembered facts can miss, and how the sweep covers it', () => {
  it('a Service deleted behind the function’s back is not noticed by cached updates; the sweep recreates it', async () => {
    const h = await audited(ENV);
    const rng = rngFrom(BASE_SEED);
    const [app] = planApps(rng, 1, { watched: [NS], prefix: 'cache' });
    const plan: AppPlan = {
      ...app!,
      driverOptIn: true,
      driverFate: 'stays',
      executors: [{ ...app!.executors[0]!, fate: 'runs', ownerRef: true, lateOptIn: false }],
    };
    const world = new World(h.emulator, 'cache');
    world.runAll([plan], rng);
    // The executor must run (issue 17: a Pending one claims no slot); the generated updates may not have started it.
    const execEvents = world.events.filter((e) => e.pod.metadata.labels['spark-role'] === 'executor');
    const execName = execEvents.at(-1)!.pod.metadata.name;
    const podNow = h.emulator.getObject('pods', NS, execName) as unknown as PodBody;
    const events = [...world.events];
    if (podNow.status.phase !== 'Running') {
      const running = h.emulator.patchObject('pods', NS, execName, {
        status: { phase: 'Running', podIP: '10.244.9.9' },
      }) as unknown as PodBody;
      const runs = { id: 'cache-runs', verb: 'update' as const, pod: running };
      events.push(runs);
      world.events.push(runs);
    }
    for (const e of events) expect((await deliver(h.url, e)).status).toBe(200);
    const expected = expectedServicesOf(world, [NS], 7079);
    expect(convergenceProblems(h.emulator, expected, [NS])).toEqual([]);
    const [svc] = [...expected.values()];
    h.emulator.deleteObject('services', NS, svc!.name); // kubectl delete svc …
    const update = world.events.filter((e) => e.pod.metadata.name === svc!.executorPodName).at(-1)!;
    const mark = h.emulator.requests.length;
    const reply = await deliver(h.url, { ...update, verb: 'update', id: 'again' });
    expect(reply.data?.outcomes[0]?.detail).toBe('executor runs; Service is right');
    expect(h.emulator.requests.length).toBe(mark); // zero API calls: the cache answered
    expect(convergenceProblems(h.emulator, expected, [NS])).toEqual([
      `missing Service ${NS}/${svc!.name} (executor ${svc!.executorPodName})`,
    ]);
    const swept = await postSweep(h.url);
    expect(swept.data?.outcomes).toEqual([expect.objectContaining({ service: svc!.name, action: 'created' })]);
    expect(convergenceProblems(h.emulator, expected, [NS])).toEqual([]);
  });
});
