/**
 * Attack class: graceful deletion. A terminating executor (deletionTimestamp set, still running:
 * a decommission migrating blocks) is live: its Service stays unmarked, even past the cool-down and
 * through sweeps, and is marked once the pod is Failed.
 */
import { describe, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/model/naming.ts';
import { GONE_AT, type Obj as SvcObj } from '../../testkit/oracle.ts';
import { sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, useAudit } from '../support/audited.ts';
import { current, scene, victimApp } from './support/tenant-scene.ts';
import { passingTime } from '../../testkit/harness.ts';

useAudit();

describe('graceful deletion: a terminating executor still runs', () => {
  it('deletionTimestamp set: unmarked, even past the cool-down and through sweeps; marked once Failed', async () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const s = await scene(
      { COOLDOWN_SECONDS: '5' },
      passingTime(() => new Date(now)),
    );
    const v = await victimApp(s, { appId: sparkAppId(801), driverName: 'victim-driver', execIds: ['1'] });
    const e2 = await v.addExecutor('2', { hold: true });
    const name = e2.metadata.name;
    const svcName = executorServiceName(v.appId, '2');
    s.change('executor 2 deleted: decommission begins (finalizer keeps it running)', () => s.h.emulator.deleteObject('pods', NS, name));
    expect(current(s.h, name).metadata.deletionTimestamp).toBeDefined();
    await s.noWrite('events and sweeps while it terminates', async () => {
      await s.event('update', current(s.h, name));
      await s.forged('delete', current(s.h, name)); // premature "deleted"
      await s.forgedRef('delete', name);
      now += 60_000; // far past the cool-down
      await s.sweep('sweep past the cool-down');
      await s.event('update', current(s.h, name));
      now += 600_000;
      await s.sweep('another sweep');
    });
    expect((s.h.emulator.getObject('services', NS, svcName) as unknown as SvcObj).metadata.annotations?.[GONE_AT]).toBeUndefined();

    s.change('executor 2 Failed', () => s.h.emulator.patchObject('pods', NS, name, { status: { phase: 'Failed' } }));
    s.genuine.delete(name);
    expect((await s.event('update', current(s.h, name))).data?.action).toBe('marked-gone');
    const marked = s.h.emulator.getObject('services', NS, svcName) as unknown as SvcObj;
    expect(marked.metadata.annotations?.[GONE_AT]).toBe(new Date(now).toISOString());
    now += 6_000;
    const last = current(s.h, name);
    s.change('finalizer removed: executor 2 gone', () => s.h.emulator.patchObject('pods', NS, name, { metadata: { finalizers: null } }));
    await s.event('delete', last);
    await s.sweep('sweep after the cool-down');
    expect(s.h.emulator.getObject('services', NS, svcName), 'cool-down over: deleted').toBeUndefined();
  });
});
