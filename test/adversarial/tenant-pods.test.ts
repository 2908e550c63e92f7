/**
 * Attack class: a tenant who may create and delete pods in a watched namespace labels them as
 * someone's executor (docs/reliability.md, "What a tenant or a forged event can and cannot do"):
 * copies with no owner, a dangling owner, an opted-in owner of their own, or the victim's own
 * driver (name and UID copied, another port); a second "driver" pod with the victim's app id; a
 * copy inside an add's batch window. The victim's Services must come through every step
 * (testkit/oracle.ts after each), and a squat with another port must end in the real executor's
 * own Service.
 */
import { describe, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/model/naming.ts';
import { OPT_IN, type PodBody, driverPod, executorPod, nonSparkPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import {
  claiming,
  current,
  ref,
  replayClaims,
  scene,
  serviceWrites,
  tenantCopy,
  tenantLifecycle,
  tenantOwner,
  victimApp,
  withHold,
} from './support/tenant-scene.ts';
import { raceScene, serviceOf } from './support/race-scene.ts';
import { PORT, app, check, fail, marked, ok, serviceIn, serviceWritesIn, svcName } from './support/steps.ts';
import { passingTime } from '../../testkit/harness.ts';

useAudit();

describe('a tenant who creates pods claiming the victim’s executor slots', () => {
  it('(a) a copy with a dangling owner reference (garbage-collected at once): its add and delete, and every claim it could make', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(101), driverName: 'victim-driver', execIds: ['1', '2'] });
    for (const [i, owner] of [
      { name: 'ghost-driver', uid: '0f0f0f0f-0000-4000-8000-000000000001' },
      { name: v.driver.metadata.name, uid: '0f0f0f0f-0000-4000-8000-000000000002' }, // the victim driver's name, another UID
    ].entries()) {
      const copy = tenantCopy(s, v, { execId: '1', name: `tenant-a${i}-exec-1`, owner });
      expect(s.h.emulator.getObject('pods', NS, copy.metadata.name), 'GC removed the pod with only a dangling owner').toBeUndefined();
      s.check(`tenant created ${copy.metadata.name} (collected)`);
      // What the ApiServerSource sends for it: an add, then a delete.
      await s.noWrite('add + delete of a collected copy', async () => {
        await s.event('add', copy);
        await s.event('delete', copy);
      });
      await replayClaims(s, copy);
    }
  });

  it('(b) a copy with no owner at all, through its whole life', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(102), driverName: 'victim-driver', execIds: ['1', '2'] });
    for (const execId of ['1', '2']) {
      const copy = tenantCopy(s, v, { execId, name: `tenant-b-exec-${execId}`, hold: true });
      s.check(`tenant created ${copy.metadata.name}`);
      await tenantLifecycle(s, copy.metadata.name);
      await replayClaims(s, copy);
    }
    await s.noWrite('sweep', () => s.sweep());
  });

  it('(c) copies owned by an opted-in pod of the tenant’s own, then the tenant deletes that owner', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(103), driverName: 'victim-driver', execIds: ['1', '2'] });
    const owner = tenantOwner(s, 'tenant-notebook');
    const held = tenantCopy(s, v, { execId: '1', name: 'tenant-c-exec-1', owner: ref(owner), hold: true });
    s.check('tenant created a held copy of executor 1');
    await tenantLifecycle(s, held.metadata.name);
    await replayClaims(s, held);

    const copies = ['1', '2'].map((execId) => tenantCopy(s, v, { execId, name: `tenant-c2-exec-${execId}`, owner: ref(owner) }));
    s.check('tenant created running copies of executors 1 and 2');
    await s.noWrite('copies running, their adds, a sweep, the owner deleted', async () => {
      for (const copy of copies) await s.event('add', current(s.h, copy.metadata.name));
      await s.sweep('sweep with the copies running');
      s.change('tenant deletes its owner pod (GC takes the copies)', () => s.h.emulator.deleteObject('pods', NS, owner.metadata.name));
      for (const copy of copies) expect(s.h.emulator.getObject('pods', NS, copy.metadata.name)).toBeUndefined();
      await s.event('delete', owner); // not a Spark pod: ignored
      for (const copy of copies) {
        await s.event('delete', copy);
        await s.forgedRef('delete', copy.metadata.name);
      }
      await s.forgedRef('delete', owner.metadata.name);
      await s.sweep('sweep after the owner went');
    });
  });

  it('(d) copies owned by the victim’s own driver (name and UID copied), one of them with another port', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(104), driverName: 'victim-driver', execIds: ['1', '2'] });
    const same = tenantCopy(s, v, { execId: '1', name: 'tenant-d-exec-1', owner: ref(v.driver), hold: true });
    const otherPort = tenantCopy(s, v, { execId: '2', name: 'tenant-d-exec-2', owner: ref(v.driver), hold: true, port: 9999 });
    s.check('tenant created copies owned by the victim driver');
    await s.noWrite('a sweep with both copies running', () => s.sweep());
    for (const copy of [same, otherPort]) {
      await tenantLifecycle(s, copy.metadata.name);
      await replayClaims(s, copy);
    }
    // A copy that is simply deleted (no finalizer): gone at once.
    const quick = tenantCopy(s, v, { execId: '2', name: 'tenant-d-quick-2', owner: ref(v.driver) });
    await s.noWrite('add, delete of a quick copy, sweep', async () => {
      await s.event('add', quick);
      s.change('tenant deletes its quick copy', () => s.h.emulator.deleteObject('pods', NS, quick.metadata.name));
      await s.event('delete', quick);
      await s.sweep();
    });
  });

  it('a second live “driver” pod claiming the victim’s app id: add, update, finished, terminating, deleted', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(105), driverName: 'victim-driver', execIds: ['1', '2', '3'] });
    const fake = s.h.createPod(withHold(driverPod({ namespace: NS, appId: v.appId, name: 'tenant-driver' })));
    s.check('tenant created a second driver with the victim app id');
    const name = fake.metadata.name;
    await s.noWrite('the fake driver’s life', async () => {
      await s.event('add', current(s.h, name));
      await s.event('update', current(s.h, name));
      s.change('fake driver Succeeded', () => s.h.emulator.patchObject('pods', NS, name, { status: { phase: 'Succeeded' } }));
      await s.event('update', current(s.h, name));
      s.change('fake driver deleted (terminating)', () => s.h.emulator.deleteObject('pods', NS, name));
      await s.event('update', current(s.h, name));
      s.change('fake driver Failed', () => s.h.emulator.patchObject('pods', NS, name, { status: { phase: 'Failed' } }));
      await s.event('update', current(s.h, name));
      const last = current(s.h, name);
      s.change('fake driver gone', () => s.h.emulator.patchObject('pods', NS, name, { metadata: { finalizers: null } }));
      await s.event('delete', last);
      await s.forgedRef('delete', name);
      await s.sweep();
    });
    // A fake driver that just runs and is then deleted outright.
    const fake2 = s.h.createPod(driverPod({ namespace: NS, appId: v.appId, name: 'tenant-driver-2' }));
    await s.noWrite('second fake driver', async () => {
      await s.event('add', fake2);
      await s.forged('update', claiming(fake2, { phase: 'Failed' }));
      s.change('second fake driver deleted', () => s.h.emulator.deleteObject('pods', NS, fake2.metadata.name));
      await s.event('delete', fake2);
    });
    // Later executors of the victim still get their Services.
    await v.addExecutor('4');
  });
});

describe('a live executor’s Service with the wrong port: a permanent squat', () => {
  // Found by review, fixed: a tenant pod copying the victim driver's owner reference (name + UID, readable by anyone who lists pods) and
  // claiming the next exec id with its own port annotation gets the slot's Service made for it, owned by the victim's driver
  // (create: the owner runs and opted in). When the genuine executor starts, its add finds two claimants ("conflict") and
  // nothing is written; once the copy was gone the slot stayed a "conflict" for good (a running pod with the same driver
  // carries the labels, "so the Service stays"): the Service kept the copy's port and identity, and the live executor's
  // block manager was unreachable through it. The trust model calls a squat harmless because "the squatting Service still
  // selects the real executor by labels" — not on another port.
  it('a copy owned by the victim’s driver with port 9999 takes slot 2 first: once the copy is gone its Service is marked (it cannot reach the real executor), and after the cool-down the real executor gets its own', async () => {
    let now = new Date('2026-12-03T12:00:00Z');
    const s = await raceScene(
      { COOLDOWN_SECONDS: '60' },
      passingTime(() => now),
    );
    const appId = sparkAppId(1201);
    const driver = s.driver(appId, 'victim-driver');
    await s.started(appId, '1', driver);
    const copySpec = executorPod({ namespace: NS, appId, execId: '2', name: 'tenant-exec-2', driver: ref(driver) });
    const copy = s.h.createPod({
      ...copySpec,
      metadata: { ...copySpec.metadata, annotations: { 'spark-exec-svc/block-manager-port': '9999' } },
    } as PodBody);
    expect((await s.event('add', copy)).data?.action).toBe('created');
    const real = s.executor(appId, '2', driver);
    expect((await s.event('add', real)).data?.action).toBe('conflict');
    s.h.emulator.deleteObject('pods', NS, copy.metadata.name);
    // The copy's Service reaches nobody (the real executor listens elsewhere): it is marked, not kept.
    expect((await s.event('delete', copy)).data?.action).toBe('marked-gone');
    await s.event('update', current(s.h, real.metadata.name));
    expect(serviceOf(s.h, executorServiceName(appId, '2'))?.metadata.annotations?.['spark-exec-svc/executor-gone-at']).toBeDefined();
    // After the cool-down the sweep ends it and the real executor gets a Service of its own.
    now = new Date('2026-12-03T12:02:00Z');
    await s.sweep();
    await s.sweep();
    expect(serviceOf(s.h, executorServiceName(appId, '2'))?.spec?.ports?.[0]?.port).toBe(7079);
    s.check('copy gone, cool-down over, sweeps');
  });
});

describe('the batch window cannot harm a live executor or make a Service for the wrong pod', () => {
  it('a tenant copy of a live executor in the window (victim’s driver as owner, another port), the Service made by another instance: no write to it', async () => {
    const h = await audited();
    const b = await audited({}, { emulator: h.emulator });
    const a = app(h, sparkAppId(3201));
    const e5 = a.exec(5);
    await ok(b.send('add', e5), 'B: add exec 5');
    const genuine = new Set([e5.metadata.name]);
    const svc5 = serviceIn(h.emulator, svcName(a.appId, 5))!.metadata.resourceVersion;
    h.createPod(
      executorPod({
        namespace: NS,
        appId: a.appId,
        execId: '5',
        name: 'tenant-copy-5',
        driver: ref(a.driver),
        blockManagerPort: 9999,
        optIn: true,
      }),
    );
    const e1 = a.exec(1);
    genuine.add(e1.metadata.name);
    h.emulator.resetRequests();
    await ok(h.send('add', e1), 'A: add exec 1 (window sees slot 5 claimed twice)');
    check(h.emulator, genuine, 'window with a copy in slot 5');
    expect(serviceIn(h.emulator, svcName(a.appId, 5))!.metadata.resourceVersion).toBe(svc5);
    expect(serviceWritesIn(h.emulator.requests).filter((r) => r.name === svcName(a.appId, 5) && r.status < 300)).toEqual([]);
  });

  it('window slots of another application’s pods and of pods whose owner is a stranger: no Service for them', async () => {
    const h = await audited();
    const a = app(h, sparkAppId(3202));
    const stranger = h.createPod(driverPod({ namespace: NS, appId: 'stranger-app', name: 'stranger', optIn: false }));
    // A tenant pod in the victim app's window, owned by a running pod that did not opt in; the pod itself does not opt in.
    h.createPod(
      executorPod({
        namespace: NS,
        appId: a.appId,
        execId: '3',
        name: 'tenant-3',
        driver: ref(stranger),
        blockManagerPort: PORT,
        optIn: false,
      }),
    );
    const e1 = a.exec(1);
    await ok(h.send('add', e1), 'add exec 1');
    // The victim's driver opted in, but slot 3's claimant is not its executor: the driver's opt-in does not cover it.
    expect(serviceIn(h.emulator, svcName(a.appId, 3))).toBeUndefined();
    check(h.emulator, new Set([e1.metadata.name]), 'window over a tenant pod');
  });

  it('a window slot whose Service this process remembers unmarked, while instance B marked it and the executor is gone: A neither unmarks nor deletes it', async () => {
    const h = await audited();
    const b = await audited({}, { emulator: h.emulator });
    const a = app(h, sparkAppId(3203));
    const e2 = a.exec(2);
    await ok(h.send('add', e2), 'A: add exec 2');
    // exec 2 ends; B (which never saw it) marks its Service.
    const ended = fail(h.emulator, e2);
    await ok(b.send('update', ended), 'B: exec 2 failed');
    expect(marked(h.emulator, svcName(a.appId, 2))).toBe(true);
    const e1 = a.exec(1);
    await ok(h.send('add', e1), 'A: add exec 1 (window covers slot 2, claimed by the failed pod)');
    expect(marked(h.emulator, svcName(a.appId, 2)), 'the mark stands').toBe(true);
    check(h.emulator, new Set([e1.metadata.name]), 'window over an ended slot');
  });
});

describe('attacks that held', () => {
  it('a tenant copy with a client-mode-like owner (its own opted-in pod) running next to the victim’s executor, then its owner deleted (GC): the victim’s Service is untouched', async () => {
    const s = await raceScene();
    const appId = sparkAppId(1503);
    const driver = s.driver(appId, 'victim-driver');
    const e1 = await s.started(appId, '1', driver);
    const box = nonSparkPod(NS, 'tenant-box');
    const owner = s.h.createPod({ ...box, metadata: { ...box.metadata, labels: { ...box.metadata.labels, ...OPT_IN } } });
    const copy = s.h.createPod(executorPod({ namespace: NS, appId, execId: '1', name: 'tenant-exec-1', driver: ref(owner), optIn: true }));
    const before = serviceWrites(s.h).length;
    await s.event('add', copy);
    await s.sweep();
    s.h.emulator.deleteObject('pods', NS, owner.metadata.name);
    await s.event('delete', copy);
    await s.event('update', current(s.h, e1.metadata.name));
    await s.sweep();
    // A create answered 409 AlreadyExists changed nothing.
    expect(
      serviceWrites(s.h)
        .slice(before)
        .filter((r) => r.status !== 409)
        .map((r) => `${r.verb} ${r.name}`),
    ).toEqual([]);
    s.check('tenant copy with its own owner, then gone');
  });
});
