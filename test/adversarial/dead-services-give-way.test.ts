/**
 * Issue 17, class 4: no attacker needed. A long-running application replaces its executors; each
 * one that ends leaves its Service marked gone (peers get "connection refused") until the
 * cool-down ends — never, with COOLDOWN_SECONDS=0, while the driver lives. Those dead executors'
 * Services count toward MAX_SERVICES_PER_NAMESPACE, and on main they fill it: the application's
 * new live executors get no Service (skipped at the cap).
 *
 * Expected (issue 17, "Caps that cannot be turned against users"; docs/reliability.md): when a
 * live executor needs room at the cap, a gone-marked Service whose executor a read made for this
 * decision finds gone (and no running pod with the same driver carries its labels) is deleted to
 * make it; a Service of a live executor never is, even one marked wrongly. The invariant
 * (testkit/oracle.ts: a missing Service is excused only while Services that are not gone-marked
 * fill the cap) is checked after every step.
 */
import { describe, expect, it } from 'vitest';
import { sparkAppId } from '../../testkit/spark-pods.ts';
import type { Harness } from '../../testkit/harness.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import { app, check, currentIn, fail, markBehindBack, marked, ok, ours, serviceIn, svcName, sweepTo } from './support/steps.ts';

useAudit();

/** The API requests since `from`, as "n: verb resource × k, …" (what making room costs). */
function requestsSince(h: Harness, from: number): string {
  const rs = h.emulator.requests.slice(from);
  const kinds = new Map<string, number>();
  for (const r of rs) kinds.set(`${r.verb} ${r.resource}`, (kinds.get(`${r.verb} ${r.resource}`) ?? 0) + 1);
  return `${rs.length} requests (${[...kinds].map(([k, n]) => `${k} × ${n}`).join(', ')})`;
}

describe('issue 17, class 4: dead executors’ Services give way to live ones at the cap', () => {
  for (const cooldown of ['0', '86400']) {
    it(`COOLDOWN_SECONDS=${cooldown}, cap 6: an application replaces its 6 executors twice over; every live executor gets its Service`, async () => {
      const CAP = 6;
      // One application here: its own cap is the namespace's (class 3's bound is cap-per-application.test.ts's).
      const h = await audited({
        MAX_SERVICES_PER_NAMESPACE: String(CAP),
        MAX_SERVICES_PER_APPLICATION: String(CAP),
        COOLDOWN_SECONDS: cooldown,
      });
      const a = app(h, sparkAppId(17_401 + Number(cooldown)));
      const live = new Set<string>();
      const step = (what: string): void => check(h.emulator, live, what, CAP);
      let next = 1;
      for (let generation = 0; generation < 3; generation++) {
        const execs = Array.from({ length: CAP }, () => a.exec(next++));
        for (const p of execs) live.add(p.metadata.name);
        for (const p of execs) {
          const reply = await ok(h.send('add', currentIn(h.emulator, p.metadata.name)), `add of ${p.metadata.name}`);
          step(`generation ${generation}: add of ${p.metadata.name} → ${reply.text}`);
        }
        for (const p of execs) {
          expect(
            serviceIn(h.emulator, svcName(a.appId, p.metadata.labels['spark-exec-id']!)),
            `generation ${generation}: Service of live ${p.metadata.name}`,
          ).toBeDefined();
        }
        expect(ours(h.emulator), 'never more than the cap').toBeLessThanOrEqual(CAP);
        // The generation ends (decommission, preemption): Failed, then deleted; each event marks its Service.
        for (const p of execs) {
          const failed = fail(h.emulator, p);
          live.delete(p.metadata.name);
          await ok(h.send('update', failed), `update (Failed) of ${p.metadata.name}`);
          h.emulator.deleteObject('pods', NS, p.metadata.name);
          await ok(h.send('delete', failed), `delete of ${p.metadata.name}`);
          step(`generation ${generation}: ${p.metadata.name} ended`);
          expect(marked(h.emulator, svcName(a.appId, p.metadata.labels['spark-exec-id']!)), `${p.metadata.name}’s Service marked`).toBe(
            true,
          );
        }
      }
      await ok(sweepTo(h.url), 'sweep');
      step('sweep');
      expect(ours(h.emulator)).toBeLessThanOrEqual(CAP);
    });
  }

  it('cap 2: a Service marked wrongly (its executor runs) never gives way; a dead one does; with none left to give way the add is skipped', async () => {
    const CAP = 2;
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: String(CAP), MAX_SERVICES_PER_APPLICATION: String(CAP), COOLDOWN_SECONDS: '0' });
    const a = app(h, sparkAppId(17_411));
    const [e1, e2] = [a.exec(1), a.exec(2)];
    await ok(h.send('add', e1), 'add of exec 1 (its window makes both)');
    expect(ours(h.emulator)).toBe(2);
    // Exec 1 runs, but its Service was marked behind the function's back (a race, a skewed instance).
    markBehindBack(h.emulator, svcName(a.appId, 1), new Date(Date.now() - 3_600_000));
    const firstService = serviceIn(h.emulator, svcName(a.appId, 1))!.metadata.uid;
    // Exec 2 ends for real.
    const failed2 = fail(h.emulator, e2);
    h.emulator.deleteObject('pods', NS, e2.metadata.name);
    await ok(h.send('delete', failed2), 'delete of exec 2');
    expect(marked(h.emulator, svcName(a.appId, 2))).toBe(true);
    // Exec 3 starts: room is made from exec 2's Service, never exec 1's.
    const e3 = a.exec(3);
    const before3 = h.emulator.requests.length;
    const r3 = await ok(h.send('add', e3), 'add of exec 3 at the cap');
    const cost3 = requestsSince(h, before3);
    expect(serviceIn(h.emulator, svcName(a.appId, 3)), `exec 3’s Service: ${r3.text}`).toBeDefined();
    expect(serviceIn(h.emulator, svcName(a.appId, 2)), 'the dead exec 2’s Service gave way').toBeUndefined();
    expect(serviceIn(h.emulator, svcName(a.appId, 1))?.metadata.uid, 'the live exec 1’s Service stays').toBe(firstService);
    // Exec 4 starts: exec 1's (marked, but its executor runs) and exec 3's are live: nothing gives way.
    const e4 = a.exec(4);
    const before4 = h.emulator.requests.length;
    const r4 = await ok(h.send('add', e4), 'add of exec 4 at the cap');
    console.log(`class 4: an add at the cap that makes room: ${cost3}; one with nothing to give way: ${requestsSince(h, before4)}`);
    expect(r4.text, 'skipped at the cap').toMatch(/MAX_SERVICES_PER_NAMESPACE/);
    expect(serviceIn(h.emulator, svcName(a.appId, 1))?.metadata.uid, 'the live exec 1’s Service stays').toBe(firstService);
    expect(serviceIn(h.emulator, svcName(a.appId, 4))).toBeUndefined();
    // The wrong mark is taken off by the function (the read made for the room found exec 1 running) or by the sweep.
    await ok(sweepTo(h.url), 'sweep');
    expect(marked(h.emulator, svcName(a.appId, 1)), 'the wrong mark is gone').toBe(false);
    check(h.emulator, new Set([e1, e3, e4].map((p) => p.metadata.name)), 'two live Services at the cap of 2', CAP);
  });
});
