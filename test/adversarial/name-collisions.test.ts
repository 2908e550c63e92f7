/**
 * Attack class: names that could collide (docs/naming.md): exec ids Spark never assigns, and app
 * ids whose plain name equals another pair's hashed fallback. No valid pair maps onto another's
 * Service, and sweeps never flip a Service between two claimants.
 */
import { describe, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/model/naming.ts';
import { SPARK_EXEC_ID } from '../../testkit/oracle.ts';
import { useAudit } from '../support/audited.ts';
import { ref, resourceVersions, scene, tenantCopy, tenantOwner, victimApp } from './support/tenant-scene.ts';

useAudit();

describe('names that could collide', () => {
  it('exec ids that are not decimal integers (e.g. "1-exec-2", which would make another app’s name) are ignored', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: 'a-exec-1', driverName: 'victim-driver', execIds: ['2'] });
    // The collision is real: app "a", exec "1-exec-2" would be Spark's name of app "a-exec-1", exec "2".
    expect(executorServiceName('a', '1-exec-2')).toBe(executorServiceName('a-exec-1', '2'));
    const owner = tenantOwner(s, 'tenant-box');
    const ids = ['1-exec-2', '01', '0', '1.0', 'x', '2a'];
    for (const [i, execId] of ids.entries()) {
      for (const owned of [ref(owner), ref(v.driver)]) {
        const copy = tenantCopy(s, v, { execId, appId: 'a', name: `tenant-odd-${i}-${owned.name}`, owner: owned });
        await s.noWrite(`tenant pod with exec id ${execId}`, async () => {
          for (const verb of ['add', 'update', 'delete'] as const) {
            const reply = await s.event(verb, copy);
            expect(reply.data?.action, `${verb} of exec id ${JSON.stringify(execId)}`).toBe('ignored');
          }
        });
      }
    }
    const before = resourceVersions(s.h);
    await s.noWrite('sweeps with the odd pods running', async () => {
      for (let i = 0; i < 3; i++) await s.sweep(`sweep ${i + 1}`);
    });
    expect(resourceVersions(s.h)).toEqual(before);
  });

  it('an app id whose plain name equals another pair’s hashed fallback: no valid pair maps there, and sweeps never flip a Service', async () => {
    const s = await scene();
    // The victim: a custom app id whose plain name is not a DNS label, so its Service has a hashed name H.
    const victimAppId = 'Nightly_ETL';
    const H = executorServiceName(victimAppId, '1');
    expect(H).toMatch(/^svc-nightly-etl-exec-1-h[0-9a-f]{10}$/);
    // Every pair whose plain name is H splits H at an "-exec-"; by construction the exec id part then
    // contains "-h<hash>", never a decimal integer: no valid pair can take H.
    const body = H.slice('svc-'.length);
    const splits = [...body.matchAll(/-exec-/g)].map((m) => ({
      appId: body.slice(0, m.index),
      execId: body.slice(m.index + '-exec-'.length),
    }));
    expect(splits.length).toBeGreaterThan(0);
    for (const split of splits) {
      expect(executorServiceName(split.appId, split.execId)).toBe(H);
      expect(SPARK_EXEC_ID.test(split.execId), `valid pair ${JSON.stringify(split)} maps to ${H}`).toBe(false);
    }
    const v = await victimApp(s, { appId: victimAppId, driverName: 'victim-driver', execIds: ['1', '2'] });
    // Apps whose names come close: the plain-name twin, an upper-case twin, the hash body as an app id.
    const twin = await victimApp(s, { appId: 'nightly-etl', driverName: 'twin-driver', execIds: ['1'] });
    const upper = await victimApp(s, { appId: 'NIGHTLY-ETL', driverName: 'upper-driver', execIds: ['1'] });
    const bodyApp = await victimApp(s, { appId: body, driverName: 'body-driver', execIds: ['1'] });
    const names = [v, twin, upper, bodyApp].map((a) => executorServiceName(a.appId, '1'));
    expect(new Set(names).size).toBe(names.length);
    // The tenant's pods whose plain name is exactly H.
    const owner = tenantOwner(s, 'tenant-box');
    for (const [i, split] of splits.entries()) {
      for (const owned of [ref(owner), ref(v.driver)]) {
        const copy = tenantCopy(s, v, { appId: split.appId, execId: split.execId, name: `tenant-h-${i}-${owned.name}`, owner: owned });
        await s.noWrite(`tenant pod ${split.appId}/${split.execId}`, async () => {
          for (const verb of ['add', 'update'] as const) expect((await s.event(verb, copy)).data?.action).toBe('ignored');
        });
      }
    }
    const before = resourceVersions(s.h);
    expect(Object.keys(before)).toContain(H);
    for (let i = 1; i <= 3; i++) {
      await s.noWrite(`sweep ${i}`, () => s.sweep(`sweep ${i}`));
      expect(resourceVersions(s.h), `resourceVersions after sweep ${i}`).toEqual(before);
    }
  });
});
