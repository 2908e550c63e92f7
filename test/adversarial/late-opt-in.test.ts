/**
 * Issue 17, class 6: opt-in changes are events too. A running driver labelled late
 * (`kubectl label pod <driver> spark-exec-svc/enabled=true`): its running executors send no more
 * events, so the driver's own update must have them looked at — their Services made now, not at
 * the next sweep. Expected from the issue and docs/reliability.md (the invariant: ./invariant.ts).
 */
import { describe, expect, it } from 'vitest';
import { NS, audited, useAudit } from '../support/audited.ts';
import { check, ok, ref, svcName, serviceIn } from './support/steps.ts';
import { OPT_IN, type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

useAudit();

const PORT = 7079;

describe('issue 17 class 6: a driver’s late opt-in', () => {
  it('the driver’s update that opts it in makes its running executors’ Services at once (no sweep)', async () => {
    const h = await audited();
    const appId = sparkAppId(17_601);
    const driver = h.createPod(driverPod({ namespace: NS, appId, optIn: false }));
    const execs = Array.from({ length: 5 }, (_, k) =>
      h.createPod(executorPod({ namespace: NS, appId, execId: String(k + 1), driver: ref(driver), blockManagerPort: PORT })),
    );
    for (const pod of execs) await ok(h.send('add', pod), 'add before the opt-in');
    expect(
      h.emulator.listObjects('services', NS, 'app.kubernetes.io/managed-by=spark-exec-svc'),
      'not opted in yet: no Services',
    ).toHaveLength(0);
    const labelled = h.emulator.patchObject('pods', NS, driver.metadata.name, { metadata: { labels: OPT_IN } }) as unknown as PodBody;
    await ok(h.send('update', labelled), 'the driver’s update: opted in');
    for (let id = 1; id <= 5; id++)
      expect(serviceIn(h.emulator, svcName(appId, id)), `Service of executor ${id} right after the driver’s opt-in`).toBeDefined();
    check(h.emulator, new Set(execs.map((p) => p.metadata.name)), 'late opt-in of the driver');
    // Later updates of the opted-in driver (status churn) cost no list of its executors.
    h.emulator.resetRequests();
    await ok(h.send('update', labelled), 'another update of the driver');
    expect(
      h.emulator.requests.filter((r) => r.resource === 'pods' && r.verb === 'list'),
      'no list on a driver update that changes nothing',
    ).toEqual([]);
  });
});
