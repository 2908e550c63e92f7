/**
 * Attack class: a driver replaced by a new run with the same app id (same or another driver pod
 * name), with the old run's end events late or lost and its finished driver pod kept. The new
 * run's executors get their own Services at their adds; nothing of the old run lands on them.
 */
import { jsonLogger } from '../../shared/ops/log.ts';
import { startHarness } from '../../testkit/harness.ts';
import { EXECUTOR_UID, type Obj } from '../../testkit/oracle.ts';
import { executorServiceName } from '../../shared/model/naming.ts';
import { ENV as MODEL_ENV } from '../model/model-run.ts';
import { describe, expect, it } from 'vitest';
import { type PodBody, driverPod, executorPod } from '../../testkit/spark-pods.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import { type Scene, type Victim, claiming, current, ref, scene, victimApp } from './support/tenant-scene.ts';

useAudit();

describe('a driver replaced by a new run with the same app id (same or another driver name)', () => {
  async function run(s: Scene, uid: string, execName: string): Promise<Victim> {
    const v = await victimApp(s, { appId: 'nightly-etl', driverName: 'nightly-etl-driver', driverUid: uid });
    await v.addExecutor('1', { name: execName });
    return v;
  }
  const U1 = '10000000-0000-4000-8000-000000000001';
  const U2 = '20000000-0000-4000-8000-000000000002';

  it.each([
    { variant: 'same executor pod name', newName: 'nightly-etl-exec-1' },
    { variant: 'new executor pod name', newName: 'nightly-etl-2-exec-1' },
  ])('late events of the old run do not touch the new run’s Service ($variant)', async ({ newName }) => {
    const s = await scene();
    const old = await run(s, U1, 'nightly-etl-exec-1');
    const oldExec = current(s.h, 'nightly-etl-exec-1');
    const oldDriver = current(s.h, 'nightly-etl-driver');
    // The old run ends as Spark ends it: executors deleted, driver Succeeded, later deleted.
    s.change('old executor deleted', () => s.h.emulator.deleteObject('pods', NS, oldExec.metadata.name));
    s.genuine.delete(oldExec.metadata.name);
    expect((await s.event('delete', oldExec)).data?.action).toBe('marked-gone');
    s.change('old driver Succeeded', () => s.h.emulator.patchObject('pods', NS, 'nightly-etl-driver', { status: { phase: 'Succeeded' } }));
    const finished = current(s.h, 'nightly-etl-driver');
    await s.event('update', finished);
    s.change('old driver deleted', () => s.h.emulator.deleteObject('pods', NS, 'nightly-etl-driver'));
    await s.event('delete', finished);
    expect(old.driver.metadata.uid).toBe(U1);

    const fresh = await run(s, U2, newName);
    expect(fresh.driver.metadata.uid).toBe(U2);
    // Late deliveries of everything the old run produced.
    await s.forged('delete', oldExec);
    await s.forged('update', claiming(oldExec, { phase: 'Failed', deleting: true }));
    await s.forged('add', oldExec);
    await s.forged('update', finished);
    await s.forged('delete', finished);
    await s.forged('update', oldDriver);
    await s.forgedRef('delete', oldExec.metadata.name);
    await s.forgedRef('delete', 'nightly-etl-driver');
    await s.noWrite('sweep', () => s.sweep());
  });

  // Was a bug (fixed): an executor add is answered from remembered facts about the slot's previous executor ("executor runs; Service is right", zero API calls, no age limit): the new run's executor gets no Service until a sweep.
  it('the old run’s end events arrive late (after the new run’s add): the new run, same driver name, gets its Service at its add', async () => {
    const s = await scene();
    const oldRun = await run(s, U1, 'nightly-etl-exec-1');
    const oldExec = current(s.h, 'nightly-etl-exec-1');
    const oldDriver = current(s.h, 'nightly-etl-driver');
    s.genuine.delete(oldExec.metadata.name);
    s.change('old driver deleted: GC takes its executor and Service (their events are still in flight)', () =>
      s.h.emulator.deleteObject('pods', NS, 'nightly-etl-driver'),
    );
    expect(s.h.services(NS)).toEqual([]);
    expect(oldRun.driver.metadata.uid).toBe(U1);
    // Fails here: answered "verified" with no API call, and no Service exists.
    await run(s, U2, 'nightly-etl-2-exec-1');
    await s.event('delete', oldExec);
    await s.event('delete', oldDriver);
    await s.sweep();
  });

  /** The first run of "nightly-etl" ends while every event of its end is lost: its executor is deleted, its driver finishes and stays. */
  async function oldRunEndedUnseen(s: Scene): Promise<{ oldExec: PodBody; oldDriver: PodBody }> {
    const oldRun = await run(s, U1, 'nightly-etl-exec-1');
    const oldExec = current(s.h, 'nightly-etl-exec-1');
    s.genuine.delete(oldExec.metadata.name);
    s.change('old executor deleted (event lost)', () => s.h.emulator.deleteObject('pods', NS, oldExec.metadata.name));
    s.change('old driver Succeeded (event lost)', () =>
      s.h.emulator.patchObject('pods', NS, oldRun.driver.metadata.name, { status: { phase: 'Succeeded' } }),
    );
    return { oldExec, oldDriver: current(s.h, oldRun.driver.metadata.name) };
  }

  // Was a bug (fixed): same root cause as above: the add is answered from the remembered old executor and old driver, and the Service of the finished run (owned by its finished driver) stays in the new run's way until a sweep.
  it('the old run’s end events lost, its finished driver pod kept: a new run with the same app id (other driver name) gets its Service at its add', async () => {
    const s = await scene();
    const { oldExec, oldDriver } = await oldRunEndedUnseen(s);
    const fresh = await victimApp(s, { appId: 'nightly-etl', driverName: 'nightly-etl-b-driver', driverUid: U2 });
    // Fails here: answered "verified" with no API call; the Service is the old run's.
    await fresh.addExecutor('1', { name: 'nightly-etl-b-exec-1' });
    await s.forged('delete', oldExec);
    await s.forged('update', oldDriver);
    await s.noWrite('sweep', () => s.sweep());
  });

  // Was a bug (fixed): deleting the old run's Service (its driver finished) because a running executor needs the name ends the event without creating that executor's Service (the delete is not followed by a new decision); only a later event or sweep creates it.
  it('the old run’s end events lost, its finished driver pod kept: a process that remembers nothing replaces the stray at the new run’s add; late old events change nothing', async () => {
    const s = await scene();
    const { oldExec, oldDriver } = await oldRunEndedUnseen(s);
    const cold = await audited({}, { emulator: s.h.emulator });
    const body = driverPod({ namespace: NS, appId: 'nightly-etl', name: 'nightly-etl-b-driver' });
    const driver = s.h.createPod({ ...body, metadata: { ...body.metadata, uid: U2 } });
    const exec = s.h.createPod(
      executorPod({ namespace: NS, appId: 'nightly-etl', execId: '1', name: 'nightly-etl-b-exec-1', driver: ref(driver) }),
    );
    s.genuine.add(exec.metadata.name);
    // Fails here: answered "deleted" (the stray), and no Service is created for the new executor.
    const reply = await s.event('add', exec, cold);
    expect(reply.data?.outcomes.map((o) => o.action)).toEqual(['deleted', 'created']);
    for (const to of [cold, s.h]) {
      await s.forged('delete', oldExec, to);
      await s.forged('update', oldDriver, to);
      await s.forged('delete', oldDriver, to);
      await s.forgedRef('delete', oldExec.metadata.name, to);
    }
    await s.noWrite('sweep', () => s.sweep());
  });
});

describe('found by the model: a new run reusing a custom app id', () => {
  // At bcac0ef (before fd2322a) the add of a new run's executor in a slot reused from an earlier
  // run was answered "verified: executor runs; Service is right" with zero API calls, from the
  // process's remembered Service, executor and driver of the previous run (whose end events had
  // been lost or had gone to the other instance): no Service until a sweep. The model finds it
  // there with PROPERTY_SEED=20260505 PROPERTY_RUNS=1 (step 77: "nightly-etl-r10-exec-2 … its
  // Service svc-nightly-etl-exec-2 is missing"); fixed since by reading the slot afresh.
  for (const sameDriverName of [true, false]) {
    it(`a new run reusing a custom app id (${sameDriverName ? 'same' : 'another'} driver pod name), the old run's end events lost: the new executor's add creates its Service`, async () => {
      const h = await startHarness(MODEL_ENV, { logger: jsonLogger('error', () => undefined) });
      try {
        const slot = executorServiceName('nightly-etl', '1');
        const d1 = h.createPod(driverPod({ namespace: NS, appId: 'nightly-etl', name: 'nightly-etl-driver' }));
        const e1 = h.createPod(
          executorPod({
            namespace: NS,
            appId: 'nightly-etl',
            execId: '1',
            name: 'nightly-etl-r1-exec-1',
            driver: { name: d1.metadata.name, uid: d1.metadata.uid! },
          }),
        );
        expect((await h.send('add', e1)).type).toBe('spark-exec-svc.service.created');
        h.emulator.deleteObject('pods', NS, d1.metadata.name); // GC takes e1 and its Service; these events are lost
        expect(h.emulator.getObject('services', NS, slot)).toBeUndefined();
        const d2 = h.createPod(
          driverPod({ namespace: NS, appId: 'nightly-etl', name: sameDriverName ? 'nightly-etl-driver' : 'nightly-etl-driver-2' }),
        );
        const e2 = h.createPod(
          executorPod({
            namespace: NS,
            appId: 'nightly-etl',
            execId: '1',
            name: 'nightly-etl-r2-exec-1',
            driver: { name: d2.metadata.name, uid: d2.metadata.uid! },
          }),
        );
        const reply = await h.send('add', e2);
        expect(reply.type, JSON.stringify(reply.data)).toBe('spark-exec-svc.service.created');
        const svc = h.emulator.getObject('services', NS, slot) as unknown as Obj | undefined;
        expect(svc?.metadata.annotations?.[EXECUTOR_UID]).toBe(e2.metadata.uid);
        expect(svc?.metadata.ownerReferences?.map((o) => o.uid)).toEqual([d2.metadata.uid]);
      } finally {
        await h.close();
      }
    });
  }
});
