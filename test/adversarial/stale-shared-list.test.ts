/**
 * Concurrent deliveries (a Broker, several senders, an event beside a sweep) share one list of an
 * application's pods: the first update of a batch lists its exec-id window, and an event that
 * arrives while that list is under way waits for it instead of listing again. A list shows what
 * held at some moment after it began — before the second executor started, perhaps. Its "Pending"
 * then says nothing about the executor whose own event says it runs now.
 *
 * Expected, from the spec (docs/reliability.md: "a remembered fact may only keep or create"): an
 * executor that runs when its update to Running is answered has its Service — whatever a list
 * begun earlier showed. Both halves of the invariant are checked after the step (testkit/oracle.ts).
 */
import { describe, expect, it } from 'vitest';
import { NS, audited, sleep, useAudit } from '../support/audited.ts';
import { app, check, currentIn, ok, serviceIn, svcName } from './support/steps.ts';

useAudit();

describe('a list another event began earlier does not stand in for a running executor’s own state', () => {
  it('executor 5’s update to Running, answered while executor 1’s window list (taken when 5 was Pending) is under way, makes 5’s Service', async () => {
    const h = await audited();
    const a = app(h, 'spark-0123456789abcdef0123456789abc501');
    const exec1 = a.exec(1, { phase: 'Pending' });
    const exec5 = a.exec(5, { phase: 'Pending' });
    const genuine = new Set([exec1.metadata.name, exec5.metadata.name]);
    for (const pod of [exec1, exec5]) await ok(h.send('add', pod), `add of ${pod.metadata.name}`);
    expect(serviceIn(h.emulator, svcName(a.appId, 1)), 'no Service for a Pending executor').toBeUndefined();

    // Executor 1 starts; its update lists the window (ids 1–32) — a list answered from the state
    // when it arrived (executor 5 still Pending), delivered 400 ms later.
    h.emulator.patchObject('pods', NS, exec1.metadata.name, { status: { phase: 'Running' } });
    h.emulator.faults.add({ verb: 'list', resource: 'pods', times: 1, fault: { kind: 'late', ms: 400 } });
    const first = h.send('update', currentIn(h.emulator, exec1.metadata.name));
    await sleep(100);
    // Meanwhile executor 5 starts, and its update arrives (another sender) while that list is under way.
    h.emulator.patchObject('pods', NS, exec5.metadata.name, { status: { phase: 'Running' } });
    const fifth = h.send('update', currentIn(h.emulator, exec5.metadata.name));
    const [r1, r5] = await Promise.all([first, fifth]);
    expect(r1.status, r1.text).toBe(200);
    expect(r5.status, r5.text).toBe(200);

    expect(serviceIn(h.emulator, svcName(a.appId, 1)), 'Service of executor 1').toBeDefined();
    expect(serviceIn(h.emulator, svcName(a.appId, 5)), `Service of executor 5 (its event answered: ${r5.text})`).toBeDefined();
    check(h.emulator, genuine, 'both updates to Running answered');
  });
});
