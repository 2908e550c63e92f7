/**
 * Issue 17, class 2: only a running executor claims its slot. A tenant who may create pods (not
 * write their status: the phase is the kubelet's, through pods/status) copies a victim's
 * executors — same labels, opted in, owned by the victim's driver (its name and UID copied) or by
 * the tenant's own opted-in pod — before the real executors start, and leaves them Pending.
 *
 * Expected, from the issue and docs/reliability.md: Pending pods neither get a Service nor keep
 * one from being made; every live executor gets its Service (./invariant.ts, written from the
 * spec); a Service already made for a live executor stays as it is.
 */
import { describe, expect, it } from 'vitest';
import { postSweep as sweepEvent } from '../../testkit/apiserversource.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import { check, deliverLikeAdapter, ok, ref, svcName, serviceIn } from './support/steps.ts';
import type { Harness } from '../../testkit/harness.ts';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

useAudit();

const PORT = 7079;

function pendingCopy(h: Harness, appId: string, execId: number, owner: { name: string; uid: string }, name: string): PodBody {
  const body = executorPod({
    namespace: NS,
    appId,
    execId: String(execId),
    name,
    driver: owner,
    blockManagerPort: PORT,
    optIn: true,
    phase: 'Pending',
  });
  delete (body.status as { podIP?: string }).podIP;
  return h.createPod(body);
}

describe('issue 17 class 2: Pending claimants neither get a Service nor block one', () => {
  it('copies of a victim’s executors left Pending (owned by the victim’s driver, or by the tenant’s pod) do not keep the real executors from their Services: adds and the sweep', async () => {
    const h = await audited();
    const appId = sparkAppId(17_201);
    const driver = h.createPod(driverPod({ namespace: NS, appId, optIn: true }));
    const tenantOwner = h.createPod(driverPod({ namespace: NS, appId: sparkAppId(17_202), name: 'tenant-pod', optIn: true }));
    // The copies come first (before Spark makes its executors), and stay Pending.
    for (let id = 1; id <= 6; id++) {
      pendingCopy(h, appId, id, ref(driver), `copy-driver-${id}`);
      pendingCopy(h, appId, id, ref(tenantOwner), `copy-tenant-${id}`);
    }
    const execs = Array.from({ length: 6 }, (_, k) =>
      h.createPod(executorPod({ namespace: NS, appId, execId: String(k + 1), driver: ref(driver), blockManagerPort: PORT })),
    );
    const genuine = new Set(execs.map((p) => p.metadata.name));
    // Events of the first three only; the others' are lost (the sweep must make theirs).
    for (const pod of execs.slice(0, 3)) {
      const { reply } = await deliverLikeAdapter(() => h.send('add', pod));
      expect(reply.status, reply.text).toBe(200);
      expect(reply.text, 'no conflict between the real executor and Pending copies').not.toMatch(/running pods claim this executor/);
    }
    for (let id = 1; id <= 3; id++)
      expect(serviceIn(h.emulator, svcName(appId, id)), `Service of executor ${id} after its add`).toBeDefined();
    const swept = await ok(sweepEvent(h.url, 'sweep-claims'), 'sweep');
    expect(swept.text).not.toMatch(/running pods claim this executor/);
    check(h.emulator, genuine, 'adds and a sweep with Pending copies in every slot');
    // Each Service is the real executor's.
    for (const pod of execs) {
      const svc = serviceIn(h.emulator, svcName(appId, pod.metadata.labels['spark-exec-id']!));
      expect(svc?.metadata.annotations?.['spark-exec-svc/executor-uid']).toBe(pod.metadata.uid);
    }
  });

  it('a Pending executor gets its Service when it runs (its update), not before; a Pending pod alone gets none from the sweep', async () => {
    const h = await audited();
    const appId = sparkAppId(17_203);
    const driver = h.createPod(driverPod({ namespace: NS, appId, optIn: true }));
    const body = executorPod({ namespace: NS, appId, execId: '1', driver: ref(driver), blockManagerPort: PORT, phase: 'Pending' });
    delete (body.status as { podIP?: string }).podIP;
    const pending = h.createPod(body);
    await ok(h.send('add', pending), 'add of the Pending executor');
    expect(serviceIn(h.emulator, svcName(appId, 1)), 'no Service for a Pending pod').toBeUndefined();
    await ok(sweepEvent(h.url, 'sweep-pending'), 'sweep');
    expect(serviceIn(h.emulator, svcName(appId, 1)), 'the sweep makes none either').toBeUndefined();
    const running = h.emulator.patchObject('pods', NS, pending.metadata.name, {
      status: { phase: 'Running', podIP: '10.244.3.9' },
    }) as unknown as PodBody;
    await ok(h.send('update', running), 'update: it runs');
    expect(serviceIn(h.emulator, svcName(appId, 1)), 'its Service once it runs').toBeDefined();
    check(h.emulator, new Set([pending.metadata.name]), 'Pending, then running');
  });

  it('a Service already made for a live executor stays when Pending copies appear, through adds, updates and sweeps', async () => {
    const h = await audited();
    const appId = sparkAppId(17_204);
    const driver = h.createPod(driverPod({ namespace: NS, appId, optIn: true }));
    const exec = h.createPod(executorPod({ namespace: NS, appId, execId: '1', driver: ref(driver), blockManagerPort: PORT }));
    await ok(h.send('add', exec), 'add');
    const before = serviceIn(h.emulator, svcName(appId, 1));
    expect(before).toBeDefined();
    const copy = pendingCopy(h, appId, 1, ref(driver), 'copy-late-1');
    await ok(h.send('add', copy), 'add of the copy');
    await ok(h.send('update', exec), 'update of the real executor');
    await ok(sweepEvent(h.url, 'sweep-keep'), 'sweep');
    const after = serviceIn(h.emulator, svcName(appId, 1));
    expect(after?.metadata.uid).toBe(before!.metadata.uid);
    expect(after?.metadata.resourceVersion, 'not written').toBe(before!.metadata.resourceVersion);
    check(h.emulator, new Set([exec.metadata.name]), 'Pending copy after the Service');
  });
});
