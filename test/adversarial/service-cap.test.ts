/**
 * Attack class: very many pods, against MAX_SERVICES_PER_NAMESPACE (docs/reliability.md): the
 * namespace fills up to the cap and no further, whether adds come one by one, as batches, at once
 * from two applications, after Services were garbage-collected, or with creates that hang or are
 * refused; the count's reservations never leak.
 */
import { describe, expect, it } from 'vitest';
import { type PodBody, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, sleep, useAudit } from '../support/audited.ts';
import { ref, scene, victimApp } from './support/tenant-scene.ts';
import { raceScene } from './support/race-scene.ts';
import { app, check, deliverLikeAdapter, instanceWithCaches, ok, ours, sendTo, serviceIn, svcName, waitUntil } from './support/steps.ts';

useAudit();

describe('bounds: MAX_SERVICES_PER_NAMESPACE', () => {
  it('with a cap of 3, five executors get three Services; the other adds are skipped, naming the cap', async () => {
    const s = await scene({ MAX_SERVICES_PER_NAMESPACE: '3', MAX_SERVICES_PER_APPLICATION: '3' });
    const v = await victimApp(s, { appId: sparkAppId(901), driverName: 'victim-driver', execIds: ['1', '2', '3'] });
    for (const id of ['4', '5']) {
      const pod = s.h.createPod(
        executorPod({ namespace: NS, appId: v.appId, execId: id, name: `victim-driver-exec-${id}`, driver: ref(v.driver) }),
      );
      s.genuine.add(pod.metadata.name);
      const reply = await s.noWrite(`add of executor ${id} over the cap`, () => s.event('add', pod));
      expect(reply.data?.action).toBe('skipped');
      expect(reply.data?.reason).toMatch(/cap is 3 \(MAX_SERVICES_PER_NAMESPACE\)/);
    }
    await s.noWrite('sweep at the cap', () => s.sweep());
    expect(s.h.emulator.listObjects('services', NS)).toHaveLength(3);
  });
});

describe('MAX_SERVICES_PER_NAMESPACE counted from stale numbers', () => {
  // Found by review, fixed: the count of our Services was remembered for 60 s and adjusted only by the process's own
  // creates and deletes; Services removed by garbage collection (a driver deleted) or by another instance were still
  // counted, so a new executor's add was answered "skipped" (final, 200: not redelivered) although the namespace was far
  // below the cap, and it had no Service until the next sweep.
  it('cap 3: an app with 3 Services ends (driver deleted, GC), a new app’s executor starts within 60 s: skipped at the cap with 0 Services', async () => {
    const s = await raceScene({ MAX_SERVICES_PER_NAMESPACE: '3', MAX_SERVICES_PER_APPLICATION: '3' });
    const a = sparkAppId(1301);
    const aDriver = s.driver(a, 'a-driver');
    const aExecs: PodBody[] = [];
    for (const id of ['1', '2', '3']) aExecs.push(await s.started(a, id, aDriver));
    s.h.emulator.deleteObject('pods', NS, aDriver.metadata.name); // GC takes executors and Services
    for (const e of aExecs) s.genuine.delete(e.metadata.name);
    expect(s.h.services(NS)).toEqual([]);
    await s.event('delete', aDriver);
    for (const e of aExecs) await s.event('delete', e);
    const b = sparkAppId(1302);
    const bDriver = s.driver(b, 'b-driver');
    const exec = s.executor(b, '1', bDriver);
    const reply = await s.event('add', exec);
    s.check(`add of a new executor with 0 Services in the namespace → ${reply.data?.action}: ${reply.data?.reason}`);
  });
});

describe('MAX_SERVICES_PER_NAMESPACE with the batch window', () => {
  it('sequential first adds of two applications: the second batch is cut at the cap', async () => {
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: '6', MAX_SERVICES_PER_APPLICATION: '6' });
    const a = app(h, sparkAppId(3501));
    const b = app(h, sparkAppId(3502));
    const ea = Array.from({ length: 6 }, (_, k) => a.exec(k + 1));
    const eb = Array.from({ length: 6 }, (_, k) => b.exec(k + 1));
    await ok(h.send('add', ea[0]!), 'add a/1');
    await ok(h.send('add', eb[0]!), 'add b/1');
    expect(h.services(NS)).toHaveLength(6);
  });

  // FOUND (fixed: decisions reserve their creates in the process's count before any is sent,
  // FactCache.reserveCreates). The spec (docs/reliability.md, rules: create "only when … the namespace is under
  // MAX_SERVICES_PER_NAMESPACE"; trust model: a tenant can "fill the namespace up to
  // MAX_SERVICES_PER_NAMESPACE Services of ours") makes the cap a bound. Two adds delivered at once
  // (a Broker; or one tenant's add racing another app's) share one count, and each now decides up
  // to 32 creates from it: the namespace ends with 2 × cap Services. Before f41b1ac two concurrent
  // adds could pass the cap by at most one (each decided only its own slot). With more concurrent
  // first adds of different apps it is k × min(32, cap − count). Fix: reserve decided creates in the
  // process-wide count before applying them (FactCache.adjustServiceCount at decision time, undone
  // on AlreadyExists/failure), or cap creates decided from a shared count to one per event.
  it('two first adds of two applications delivered at once: their batches share the cap, the namespace does not pass it', async () => {
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: '6', MAX_SERVICES_PER_APPLICATION: '6' });
    const a = app(h, sparkAppId(3503));
    const b = app(h, sparkAppId(3504));
    const ea = Array.from({ length: 6 }, (_, k) => a.exec(k + 1));
    const eb = Array.from({ length: 6 }, (_, k) => b.exec(k + 1));
    const replies = await Promise.all([h.send('add', ea[0]!), h.send('add', eb[0]!)]);
    expect(replies.map((r) => r.status)).toEqual([200, 200]);
    expect(h.services(NS).length, 'Services of ours vs MAX_SERVICES_PER_NAMESPACE=6').toBeLessThanOrEqual(6);
  });
});

describe('create reservations in the process count (MAX_SERVICES_PER_NAMESPACE)', () => {
  // DEFECT (medium, liveness). reconcileSlotsUnderWay reserves a batch's creates
  // (reserveCreates(+n)) and releases them only when *every* action of the batch has settled, while
  // each create that succeeds adds itself to the process count at once (adjustServiceCount(+1)).
  // Until the slowest action of the batch settles (a slow create, a 429-retried patch of the same
  // batch: up to EVENT_DEADLINE_MS), every finished create is counted twice by countNow()
  // (count + createsUnderWay), and a fresh recount does not help (max(listed, process count) +
  // createsUnderWay). Another application's add in that window is refused as "cap reached" —
  // answered 200 'skipped', so Knative does not redeliver — although the namespace stays under the
  // cap with it. Here: cap 10, 3 Services, app A's first add decides 6 creates (one fast, five
  // slow); B's add arrives after the fast one landed: 3 + 6 (A's, reserved or made) + 1 = 10 ≤ cap,
  // so B's executor must get its Service (the spec: create when "the namespace is under
  // MAX_SERVICES_PER_NAMESPACE": before B's create it holds at most 9).
  // Suggested fix: release each create's reservation in the same synchronous step that adds it to
  // the count (reserve per action; in apply's create: adjustServiceCount(+1) and reserveCreates(-1)
  // together; on 'exists'/failure only reserveCreates(-1)), and let a fresh recount not add
  // reservations whose creates the list may already include (or accept that brief transient).
  it('another application’s add while a batch’s creates are under way is not refused by counting the finished ones twice', async () => {
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: '10', MAX_SERVICES_PER_APPLICATION: '10' });
    const c = app(h, sparkAppId(4101));
    const ec = Array.from({ length: 3 }, (_, k) => c.exec(k + 1));
    await ok(h.send('add', ec[0]!), 'C: first add (window makes 3)');
    expect(ours(h.emulator)).toBe(3);
    const a = app(h, sparkAppId(4102));
    const ea = Array.from({ length: 6 }, (_, k) => a.exec(k + 1));
    const b = app(h, sparkAppId(4103));
    const eb = b.exec(1);
    // A's first create answers fast, the next five slowly.
    h.emulator.faults.add({ verb: 'create', resource: 'services', times: 1, fault: { kind: 'delay', ms: 20 } });
    h.emulator.faults.add({ verb: 'create', resource: 'services', times: 5, fault: { kind: 'delay', ms: 1500 } });
    const first = h.send('add', ea[0]!);
    await waitUntil(() => ours(h.emulator) >= 4, 3000);
    expect(ours(h.emulator), 'A’s fast create landed').toBe(4);
    const rb = await ok(h.send('add', eb), 'B: add while A’s slow creates are under way');
    await ok(first, 'A: first add');
    expect(serviceIn(h.emulator, svcName(b.appId, 1)), `B’s executor runs, the namespace held at most 9 of 10: ${rb.text}`).toBeDefined();
    check(h.emulator, new Set([...ec, ...ea, eb].map((p) => p.metadata.name)), 'A’s batch and B’s add', 10);
  });

  it('reservations do not leak: creates that hang past the deadline, then creates refused 403 — afterwards the namespace still fills exactly to the cap', async () => {
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: '8', MAX_SERVICES_PER_APPLICATION: '8' });
    const fn = await instanceWithCaches(h.emulator, {
      MAX_SERVICES_PER_NAMESPACE: '8',
      MAX_SERVICES_PER_APPLICATION: '8',
      EVENT_DEADLINE_MS: '600',
      REQUEST_TIMEOUT_MS: '300',
    });
    try {
      const a = app(h, sparkAppId(4111));
      const ea = Array.from({ length: 8 }, (_, k) => a.exec(k + 1));
      h.emulator.faults.add({ verb: 'create', resource: 'services', times: Number.POSITIVE_INFINITY, fault: { kind: 'hang' } });
      expect((await sendTo(fn.url, 'add', ea[0]!)).status).toBe(503);
      h.emulator.faults.clear();
      await sleep(400); // abandoned attempts end at REQUEST_TIMEOUT_MS
      expect(fn.caches.facts.createsUnderWay(NS), 'no creates left reserved after a 503').toBe(0);
      h.emulator.faults.add({
        verb: 'create',
        resource: 'services',
        times: 2,
        fault: { kind: 'status', code: 403, message: 'exceeded quota: count/services' },
      });
      expect((await sendTo(fn.url, 'add', ea[1]!)).status).toBe(500);
      await sleep(100);
      expect(fn.caches.facts.createsUnderWay(NS), 'no creates left reserved after a 500').toBe(0);
      h.emulator.faults.clear();
      for (const p of ea) expect((await deliverLikeAdapter(() => sendTo(fn.url, 'add', p))).reply.status).toBe(200);
      expect(ours(h.emulator), 'every executor of the 8 got a Service: the cap is 8').toBe(8);
      check(h.emulator, new Set(ea.map((p) => p.metadata.name)), 'after hangs and refusals', 8);
      // One more executor: the cap holds (the count is not under-counted either).
      const extra = a.exec(9);
      await ok(sendTo(fn.url, 'add', extra), 'add exec 9 at the cap');
      expect(ours(h.emulator)).toBe(8);
      expect(fn.caches.facts.createsUnderWay(NS)).toBe(0);
    } finally {
      await fn.close();
    }
  });

  it('after a driver deleted (GC took its Services), the process count does not stay over-counted: a new application fills up to the cap', async () => {
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: '6', MAX_SERVICES_PER_APPLICATION: '6' });
    const a = app(h, sparkAppId(4121));
    const ea = Array.from({ length: 6 }, (_, k) => a.exec(k + 1));
    await ok(h.send('add', ea[0]!), 'A: first add (6 Services, at the cap)');
    expect(ours(h.emulator)).toBe(6);
    h.emulator.deleteObject('pods', NS, a.driver.metadata.name);
    for (const p of ea)
      if (h.emulator.getObject('pods', NS, p.metadata.name) !== undefined) h.emulator.deleteObject('pods', NS, p.metadata.name);
    expect(ours(h.emulator), 'GC took them').toBe(0);
    const b = app(h, sparkAppId(4122));
    const eb = Array.from({ length: 6 }, (_, k) => b.exec(k + 1));
    await ok(h.send('add', eb[0]!), 'B: first add');
    expect(ours(h.emulator)).toBe(6);
    check(h.emulator, new Set(eb.map((p) => p.metadata.name)), 'B at the cap', 6);
  });
});
