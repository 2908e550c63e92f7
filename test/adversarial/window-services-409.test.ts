/**
 * From the review of 87bec4d, cost: the window's Services listed with the claimant list are the view's
 * fresh facts for every window slot. A window slot whose Service this process creates meanwhile
 * (its own add, done before this update decides the window) is still 'absent' in the view: the
 * update creates it again (409 AlreadyExists) and reads it, where before it trusted its own write
 * (claimedUnknownServices skips a Service the process remembers). No invariant break: a cost.
 * HOLDS on 87bec4d: exec 2's add joins exec 1's pod list and holds slot 2 meanwhile, so exec 1's
 * update leaves slot 2 to it (holdFree) and never decides it from the stale window list.
 */
import { describe, expect, it } from 'vitest';
import { sparkAppId } from '../../testkit/spark-pods.ts';
import { audited, useAudit, sleep } from '../support/audited.ts';
import { app, check, currentIn, ok } from './support/steps.ts';

useAudit();

describe('review 87bec4d: a window Service made by this process while the update lists the window', () => {
  it('no create that fails with 409', async () => {
    const h = await audited();
    const a = app(h, sparkAppId(18_911));
    const e1 = a.exec(1);
    const e2 = a.exec(2);
    // The process knows exec 1's driver (so the update's only slow read is its list).
    const before = h.emulator.requests.filter((r) => r.verb === 'list' && r.resource === 'pods').length;
    h.emulator.faults.add({ verb: 'list', resource: 'pods', fault: { kind: 'late', ms: 300 } });
    const pending = h.send('update', currentIn(h.emulator, e1.metadata.name));
    const end = Date.now() + 2000;
    while (h.emulator.requests.filter((r) => r.verb === 'list' && r.resource === 'pods').length === before) {
      if (Date.now() > end) throw new Error('no pod list');
      await sleep(2);
    }
    await sleep(20);
    const r2 = await ok(h.send('add', currentIn(h.emulator, e2.metadata.name)), 'add of exec 2 meanwhile');
    console.log(`exec 2's add: ${r2.text}`);
    const r1 = await pending;
    expect(r1.status, r1.text).toBe(200);
    console.log(`exec 1's update: ${r1.text}`);
    check(h.emulator, new Set([e1.metadata.name, e2.metadata.name]), 'both');
    const conflicts = h.emulator.requests.filter((r) => r.verb === 'create' && r.resource === 'services' && r.status === 409);
    console.log(h.emulator.requests.map((r) => `${r.verb} ${r.resource} ${r.name ?? ''} ${r.status}`).join('\n'));
    expect(conflicts.length, 'creates answered 409').toBe(0);
  });
});
