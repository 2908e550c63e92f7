/**
 * Every event is answered, and answered in time, when many arrive at once or the API server is
 * slow: events of one slot take turns and the turns are always released (hung creates, 403s,
 * 500s); a slow API server makes the first add of a batch or an application's end exceed its
 * deadline, and the ApiServerSource's redeliveries converge; common flows on a warm instance end
 * 2xx.
 */
import { describe, expect, it } from 'vitest';
import { type PodBody, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, sleep, useAudit } from '../support/audited.ts';
import { passingTime } from '../../testkit/harness.ts';
import {
  app,
  check,
  currentIn,
  deliverLikeAdapter,
  fail,
  instanceWithCaches,
  marked,
  ok,
  ours,
  sendTo,
  serviceIn,
  serviceWritesIn,
  svcName,
} from '../adversarial/support/steps.ts';

useAudit();

describe('the register of slots under way', () => {
  it('an event holding 32 window slots hangs on its creates: events waiting for its slots answer by about their own deadline, later ones are decided, and the register is left empty', async () => {
    const h = await audited();
    const fn = await instanceWithCaches(h.emulator, { EVENT_DEADLINE_MS: '600', REQUEST_TIMEOUT_MS: '300' });
    try {
      const a = app(h, sparkAppId(3301));
      const execs = Array.from({ length: 32 }, (_, k) => a.exec(k + 1));
      h.emulator.faults.add({ verb: 'create', resource: 'services', times: Number.POSITIVE_INFINITY, fault: { kind: 'hang' } });
      const first = sendTo(fn.url, 'add', execs[0]!);
      // Wait until the first event holds the window (its creates are under way).
      const end = Date.now() + 2000;
      while (h.emulator.countRequests({ verb: 'create', resource: 'services' }) === 0 && Date.now() < end) await sleep(5);
      expect(fn.caches.facts.slotsUnderWay.size).toBeGreaterThan(1);
      const started = Date.now();
      const waiting = await Promise.all(execs.slice(1, 9).map((p) => sendTo(fn.url, 'add', p)));
      expect(Date.now() - started, 'waiters answered within ~ their own deadline').toBeLessThan(1500);
      expect(waiting.every((r) => r.status === 200 || r.status === 503)).toBe(true);
      expect((await first).status).toBe(503);
      h.emulator.faults.clear();
      await sleep(400); // abandoned attempts end at REQUEST_TIMEOUT_MS
      expect(fn.caches.facts.slotsUnderWay.size, 'register empty after failures').toBe(0);
      for (const p of execs) expect((await deliverLikeAdapter(() => sendTo(fn.url, 'add', p))).reply.status).toBe(200);
      check(h.emulator, new Set(execs.map((p) => p.metadata.name)), 'redelivered');
      expect(fn.caches.facts.slotsUnderWay.size).toBe(0);
    } finally {
      await fn.close();
    }
  });

  it('final errors (403 on create) and 500s: the register is released, the event is answered, nothing stays held', async () => {
    const h = await audited();
    const fn = await instanceWithCaches(h.emulator);
    try {
      const a = app(h, sparkAppId(3302));
      const execs = Array.from({ length: 10 }, (_, k) => a.exec(k + 1));
      h.emulator.faults.add({
        verb: 'create',
        resource: 'services',
        times: 3,
        fault: { kind: 'status', code: 403, message: 'exceeded quota: count/services' },
      });
      const r = await sendTo(fn.url, 'add', execs[0]!);
      expect(r.status).toBe(500);
      await sleep(200);
      expect(fn.caches.facts.slotsUnderWay.size).toBe(0);
      for (const p of execs) expect((await sendTo(fn.url, 'add', p)).status).toBe(200);
      check(h.emulator, new Set(execs.map((p) => p.metadata.name)), 'after a quota refusal');
    } finally {
      await fn.close();
    }
  });

  it('an application’s 32 ended executors delivered all at once (Broker): every event answered, every Service marked, the register empty', async () => {
    const h = await audited();
    const fn = await instanceWithCaches(h.emulator);
    try {
      const a = app(h, sparkAppId(3303));
      const execs = Array.from({ length: 32 }, (_, k) => a.exec(k + 1));
      await ok(sendTo(fn.url, 'add', execs[0]!), 'first add');
      for (const p of execs) await ok(sendTo(fn.url, 'add', p), 'add');
      const ended = execs.map((p) => fail(h.emulator, p));
      h.emulator.resetRequests();
      const replies = await Promise.all(ended.map((p) => sendTo(fn.url, 'update', p)));
      expect(replies.map((r) => r.status)).toEqual(ended.map(() => 200));
      for (let id = 1; id <= 32; id++) expect(marked(h.emulator, svcName(a.appId, id))).toBe(true);
      expect(fn.caches.facts.slotsUnderWay.size).toBe(0);
    } finally {
      await fn.close();
    }
  });
});

describe('a slow API server (every request 280 ms, EVENT_DEADLINE_MS 1.5 s)', () => {
  it('the first add of a batch of 32 may exceed its deadline, and the ApiServerSource’s redeliveries converge: every executor gets its Service', async () => {
    const h = await audited();
    const a = app(h, sparkAppId(3401));
    const execs = Array.from({ length: 32 }, (_, k) => a.exec(k + 1));
    h.emulator.faults.add({ times: Number.POSITIVE_INFINITY, fault: { kind: 'delay', ms: 280 } });
    let fivexx = 0;
    for (const p of execs) {
      const { reply, attempts } = await deliverLikeAdapter(() => h.send('add', p));
      expect(reply.status, `${p.metadata.name} after ${attempts} attempts`).toBe(200);
      fivexx += attempts - 1;
    }
    h.emulator.faults.clear();
    await sleep(1200);
    check(h.emulator, new Set(execs.map((p) => p.metadata.name)), 'slow scale-up');
    // Report how many redeliveries the window cost (not an assertion on the number).
    console.log(`slow scale-up of 32: ${fivexx} redeliveries`);
  }, 60_000);

  it('an application’s end (32 executors): the ended event with 31 peers (list + 4 waves of patches) stays within or exceeds its deadline; the redeliveries converge, every Service marked once', async () => {
    const h = await audited();
    const a = app(h, sparkAppId(3402));
    const execs = Array.from({ length: 32 }, (_, k) => a.exec(k + 1));
    await ok(h.send('add', execs[0]!), 'first add');
    for (const p of execs) await ok(h.send('add', p), 'add');
    const ended = execs.map((p) => fail(h.emulator, p));
    h.emulator.resetRequests();
    h.emulator.faults.add({ times: Number.POSITIVE_INFINITY, fault: { kind: 'delay', ms: 280 } });
    let fivexx = 0;
    for (const p of ended) {
      const { reply, attempts } = await deliverLikeAdapter(() => h.send('update', p));
      expect(reply.status, `${p.metadata.name} after ${attempts} attempts`).toBe(200);
      fivexx += attempts - 1;
    }
    h.emulator.faults.clear();
    await sleep(1200);
    for (let id = 1; id <= 32; id++) expect(marked(h.emulator, svcName(a.appId, id)), `Service ${id} marked`).toBe(true);
    const okPatches = serviceWritesIn(h.emulator.requests).filter((r) => r.verb === 'patch' && r.status === 200);
    expect(new Set(okPatches.map((r) => r.name)).size).toBe(32);
    console.log(`slow teardown of 32: ${fivexx} redeliveries, ${okPatches.length} patches landed`);
  }, 60_000);
});

describe('liveness: common flows end 2xx without FactsKeptChangingError', () => {
  it('scale-up of 32 delivered all at once (Broker) to a warm instance, then all redelivered at once: every event 200, every Service once', async () => {
    const h = await audited();
    const a = app(h, sparkAppId(4301));
    const execs = Array.from({ length: 32 }, (_, k) => a.exec(k + 1));
    const first = await Promise.all(execs.map((p) => h.send('add', p)));
    expect(first.map((r) => r.status)).toEqual(execs.map(() => 200));
    const again = await Promise.all([...execs].reverse().map((p) => h.send('update', currentIn(h.emulator, p.metadata.name))));
    expect(again.map((r) => r.status)).toEqual(execs.map(() => 200));
    expect(h.emulator.requests.filter((r) => r.verb === 'create' && r.resource === 'services' && r.status === 201)).toHaveLength(32);
    check(h.emulator, new Set(execs.map((p) => p.metadata.name)), 'scale-up');
  });

  it('teardown: 32 ended executors, their failed and delete events interleaved and at once, then the driver finishes: all 200, all marked, then all deleted', async () => {
    const h = await audited();
    const a = app(h, sparkAppId(4302));
    const execs = Array.from({ length: 32 }, (_, k) => a.exec(k + 1));
    await ok(h.send('add', execs[0]!), 'first add');
    const ended = execs.map((p) => fail(h.emulator, p));
    const replies = await Promise.all(
      ended.flatMap((p, k) => (k % 2 === 0 ? [h.send('update', p), h.send('delete', p)] : [h.send('delete', p), h.send('update', p)])),
    );
    expect(replies.map((r) => r.status)).toEqual(replies.map(() => 200));
    for (let id = 1; id <= 32; id++) expect(marked(h.emulator, svcName(a.appId, id)), `Service ${id} marked`).toBe(true);
    const driver = h.emulator.patchObject('pods', NS, a.driver.metadata.name, { status: { phase: 'Succeeded' } }) as unknown as PodBody;
    await ok(h.send('update', driver), 'driver finished');
    expect(ours(h.emulator)).toBe(0);
  });

  it('an executor ended while its peers run and one peer is added meanwhile, on a warm instance with a 10 s-old cache: only the ended one is marked, no 503', async () => {
    let now = Date.now();
    const h = await audited(
      {},
      passingTime(() => new Date(now)),
    );
    const a = app(h, sparkAppId(4303));
    const execs = Array.from({ length: 12 }, (_, k) => a.exec(k + 1));
    await ok(h.send('add', execs[0]!), 'first add');
    now += 11_000; // remembered facts are past FACT_TTL
    const ended = fail(h.emulator, execs[5]!);
    const late = a.exec(13);
    const replies = await Promise.all([
      h.send('update', ended),
      h.send('add', late),
      h.send('update', currentIn(h.emulator, execs[6]!.metadata.name)),
    ]);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200]);
    expect([...Array(13).keys()].filter((k) => marked(h.emulator, svcName(a.appId, k + 1))).map((k) => k + 1)).toEqual([6]);
    check(h.emulator, new Set([...execs.filter((_, k) => k !== 5), late].map((p) => p.metadata.name)), 'one ended among running peers');
  });

  // DEFECT (low, liveness/cost; a regression of pinning). A remembered Service is now pinned in the
  // view with an order after the list that brought its slot into the window, so a window slot whose
  // listed pod ended needs two more rounds (read the pod, list the slot again) — and a single such
  // slot is listed again *with its own 31-id window*, which brings in the next window's slots, and
  // so on. Executors that ended but whose pods stay (spark.kubernetes.executor.deleteOnTermination=
  // false, their events lost or not yet delivered) one per window hop make a late add of a lower id
  // run out of MAX_ROUNDS (10) and answer 503 ("kept changing") though nothing changed. Before
  // e4377ea the first list proved such a slot's end at once (remembered order 0): the same test on
  // e4377ea~1 answers 200 after 3 calls; now it takes 10 pod lists and answers 503 (the
  // redelivery then succeeds from remembered facts, so this costs a 503 and ~20 calls, not an
  // executor's Service).
  // The spec: an add is answered 2xx once its work is done; the window is "a matter of cost".
  // Suggested fix: do not add the window when re-listing a slot that is itself a window slot (or
  // when claimantWindow was already used by this view), and do not hand out again window slots
  // this view already decided.
  it('a late add whose window reaches executors that ended and stay, one per window hop (11 of 290): answered 200', async () => {
    const h = await audited();
    const a = app(h, sparkAppId(4304));
    const execs = Array.from({ length: 290 }, (_, k) => a.exec(k + 1));
    // The instance made (and remembers) the Services of 2..290: adds delivered out of order.
    for (let id = 2; id <= 290; id += 32) await ok(h.send('add', execs[id - 1]!), `add ${id}`);
    for (let id = 2; id <= 290; id++) expect(serviceIn(h.emulator, svcName(a.appId, id)), `Service ${id}`).toBeDefined();
    // One ended executor per window hop (25 ids apart): each one's re-list brings in the next window.
    const endedIds = Array.from({ length: 11 }, (_, k) => 20 + 25 * k);
    for (const id of endedIds) fail(h.emulator, execs[id - 1]!); // their events are not delivered (yet)
    h.emulator.resetRequests();
    const reply = await h.send('add', execs[0]!);
    const lists = h.emulator.requests.filter((r) => r.verb === 'list' && r.resource === 'pods').length;
    console.log(`late add: ${h.emulator.requests.length} calls, ${lists} pod lists, answered ${reply.status}`);
    expect(reply.status, reply.text).toBe(200);
    expect(serviceIn(h.emulator, svcName(a.appId, 1))).toBeDefined();
    // Before e4377ea this event cost 3 calls (one list, the create, the mark of exec 20) and 200.
    check(h.emulator, new Set(execs.filter((_, k) => !endedIds.includes(k + 1)).map((p) => p.metadata.name)), 'late add');
  });
});
