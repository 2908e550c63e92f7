/**
 * Attack class: anyone who can reach the function's URL POSTs CloudEvents (docs/reliability.md):
 * "executor deleted / Failed" and "driver deleted / finished" carrying the victim's real pod JSON
 * and UIDs, in Resource and Reference mode, to a warm and a cold instance. The API server's state
 * never justifies a write, so none may happen.
 */
import { describe, expect, it } from 'vitest';
import { executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import { claiming, current, ref, scene, serviceWrites, victimApp } from './support/tenant-scene.ts';
import { raceScene, untilSeen } from './support/race-scene.ts';

useAudit();

describe('forged CloudEvents about the victim’s running pods', () => {
  it('executor deleted / Failed, driver deleted / Succeeded, with the real pod JSON and UIDs, in both modes, to a warm and a cold instance: no write', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(201), driverName: 'victim-driver', execIds: ['1', '2', '3'] });
    const cold = await audited({}, { emulator: s.h.emulator }); // a fresh process: nothing remembered
    const driver = current(s.h, v.driver.metadata.name);
    for (const to of [s.h, cold]) {
      for (const id of ['1', '2', '3']) {
        const exec = current(s.h, v.execs.get(id)!.metadata.name);
        await s.forged('delete', exec, to);
        await s.forged('update', claiming(exec, { phase: 'Failed' }), to);
        await s.forged('update', claiming(exec, { phase: 'Succeeded', deleting: true }), to);
        await s.forged('delete', claiming(exec, { phase: 'Failed', deleting: true }), to, 'structured');
        await s.forged('update', claiming(exec, { deleting: true }), to);
        // "It was replaced": the same name with another UID, ended.
        await s.forged('delete', claiming(exec, { uid: '11111111-2222-4333-8444-555555555555', phase: 'Failed' }), to);
        // "Its driver is gone": the executor pointing at a driver that does not exist.
        await s.forged(
          'delete',
          {
            ...exec,
            metadata: {
              ...exec.metadata,
              ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'nobody', uid: 'u-nobody', controller: true }],
            },
          },
          to,
        );
      }
      await s.forged('delete', driver, to);
      await s.forged('update', claiming(driver, { phase: 'Succeeded' }), to);
      await s.forged('update', claiming(driver, { phase: 'Failed', deleting: true }), to, 'structured');
      await s.forged('delete', claiming(driver, { phase: 'Succeeded' }), to);
      // A driver "replaced" under the same name.
      await s.forged('update', claiming(driver, { uid: '66666666-7777-4888-8999-000000000000', phase: 'Succeeded' }), to);
      for (const name of [...[...v.execs.values()].map((e) => e.metadata.name), driver.metadata.name]) {
        await s.forgedRef('delete', name, to);
        await s.forgedRef('update', name, to);
      }
      // An add for an executor that does not exist: nothing to create.
      const ghost = executorPod({ namespace: NS, appId: v.appId, execId: '9', name: 'victim-driver-exec-9', driver: ref(v.driver) });
      await s.forged('add', { ...ghost, metadata: { ...ghost.metadata, uid: '99999999-0000-4000-8000-000000000009' } }, to);
      await s.noWrite('sweep after the forged events', () => s.sweep('sweep', to));
    }
  });
});

describe('attacks that held: Reference mode', () => {
  it('Reference mode: a delete of a name that is absent when read, while a new executor of that name starts and gets its Service: no write', async () => {
    const s = await raceScene();
    const b = await audited({}, { emulator: s.h.emulator });
    const appId = sparkAppId(1501);
    const driver = s.driver(appId, 'victim-driver');
    await s.started(appId, '1', driver);
    const name = 'victim-driver-exec-2';
    // The pod read says absent; then the list of our Services naming it is held while the executor starts.
    s.h.emulator.faults.add({ verb: 'list', resource: 'services', times: 1, fault: { kind: 'delay', ms: 300 } });
    const writesBefore = serviceWrites(s.h).length;
    const pending = s.h.sendRef('delete', NS, name);
    await untilSeen('A lists Services', () =>
      s.h.emulator.requests.some((r) => r.verb === 'list' && r.resource === 'services' && r.status === 0),
    );
    const exec = await s.started(appId, '2', driver, { name, to: b });
    const reply = await pending;
    expect(reply.status, reply.text).toBe(200);
    const writes = serviceWrites(s.h)
      .slice(writesBefore)
      .filter((r) => r.verb !== 'create');
    expect(writes.map((r) => `${r.verb} ${r.name}`)).toEqual([]);
    s.check(`reference delete of ${exec.metadata.name} raced with its start`);
  });
});

describe('attacks that held', () => {
  it('forged "driver finished/deleted" events for an app with 60 Services (several pages), to a warm and a cold instance: no write', async () => {
    const s = await raceScene();
    const appId = sparkAppId(1502);
    const driver = s.driver(appId, 'victim-driver');
    for (let i = 1; i <= 60; i++) s.executor(appId, String(i), driver);
    await s.sweep(); // creates the 60 Services
    s.check('60 Services');
    const cold = await audited({}, { emulator: s.h.emulator });
    const before = serviceWrites(s.h).length;
    const d = current(s.h, driver.metadata.name);
    for (const to of [s.h, cold]) {
      await s.event('delete', d, to);
      await s.event('update', { ...d, status: { ...d.status, phase: 'Succeeded' } }, to);
      await s.event(
        'update',
        { ...d, metadata: { ...d.metadata, uid: '0badc0de-0000-4000-8000-0000000000ff' }, status: { ...d.status, phase: 'Failed' } },
        to,
      );
      expect((await to.sendRef('delete', NS, d.metadata.name)).status).toBe(200);
    }
    expect(
      serviceWrites(s.h)
        .slice(before)
        .map((r) => `${r.verb} ${r.name}`),
    ).toEqual([]);
    s.check('forged driver events');
  });
});
