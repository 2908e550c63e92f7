/**
 * Issue 17, class 7: two configurations at once. During a rollout that changes
 * BLOCK_MANAGER_PORT, two instances disagree on the default port of executors that do not say
 * theirs. A Service's port, once made for an executor incarnation, must not flip with another
 * instance's configuration (the issue); the sweeps of both instances leave it as made.
 */
import { describe, expect, it } from 'vitest';
import { postSweep as sweepEvent } from '../../testkit/apiserversource.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import { ok, ref, svcName, serviceIn } from './support/steps.ts';
import { driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

useAudit();

describe('issue 17 class 7: one port per executor incarnation', () => {
  it('instances configured with BLOCK_MANAGER_PORT 7079 and 7080: the Service keeps the port it was made with through both instances’ sweeps and updates', async () => {
    const a = await audited({ BLOCK_MANAGER_PORT: '7079' });
    const b = await audited({ BLOCK_MANAGER_PORT: '7080' }, { emulator: a.emulator });
    const appId = sparkAppId(17_701);
    const driver = a.createPod(driverPod({ namespace: NS, appId, optIn: true }));
    // The executor says nothing of its port: each instance falls back on its own configuration.
    const exec = a.createPod(executorPod({ namespace: NS, appId, execId: '1', driver: ref(driver) }));
    await ok(a.send('add', exec), 'add on the instance configured 7079');
    const made = serviceIn(a.emulator, svcName(appId, 1));
    expect(made?.spec?.ports?.[0]?.port).toBe(7079);
    for (const [h, what] of [
      [b, 'sweep on 7080'],
      [a, 'sweep on 7079'],
      [b, 'second sweep on 7080'],
    ] as const) {
      await ok(sweepEvent(h.url, `sweep-port-${Math.random().toString(36).slice(2)}`), what);
      expect(serviceIn(a.emulator, svcName(appId, 1))?.spec?.ports?.[0]?.port, `port after the ${what}`).toBe(7079);
    }
    await ok(b.send('update', exec), 'update on 7080');
    const after = serviceIn(a.emulator, svcName(appId, 1));
    expect(after?.spec?.ports?.[0]?.port).toBe(7079);
    expect(after?.metadata.resourceVersion, 'never written').toBe(made!.metadata.resourceVersion);
  });
});
