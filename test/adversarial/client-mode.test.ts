/**
 * Attack class: client mode, where the executor's owner is a pod without spark-role (a notebook).
 * Drivers are found by the executor's owner reference, never by labels: its executor's Service is
 * created and sweeps keep it.
 */
import { describe, expect, it } from 'vitest';
import { executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, useAudit } from '../support/audited.ts';
import { claiming, ref, resourceVersions, scene, tenantOwner } from './support/tenant-scene.ts';

useAudit();

describe('client mode: the executor’s owner is a pod without spark-role', () => {
  it('a notebook pod as driver: its executor’s Service is created, and sweeps keep it', async () => {
    const s = await scene();
    const notebook = tenantOwner(s, 'jupyter-0');
    expect(notebook.metadata.labels['spark-role']).toBeUndefined();
    const appId = sparkAppId(601);
    for (const id of ['1', '2']) {
      const e = s.h.createPod(executorPod({ namespace: NS, appId, execId: id, name: `jupyter-exec-${id}`, driver: ref(notebook) }));
      s.genuine.add(e.metadata.name);
      expect((await s.event('add', e)).data?.action).toBe('created');
    }
    const before = resourceVersions(s.h);
    await s.noWrite('two sweeps', async () => {
      await s.sweep('sweep 1');
      await s.sweep('sweep 2');
    });
    expect(resourceVersions(s.h)).toEqual(before);
    // Forged "driver" events about the notebook pod.
    await s.forged('delete', notebook);
    await s.forged('update', claiming(notebook, { phase: 'Succeeded' }));
    await s.forgedRef('delete', 'jupyter-0');
  });
});
