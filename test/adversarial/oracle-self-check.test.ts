/**
 * The oracle itself (testkit/oracle.ts): every kind of harm to a live executor's Service — a
 * mark, a deletion, another or a second owner, a re-pointed or wider selector, another port — is
 * reported, and nothing else. The adversarial suites rely on it after every step.
 */
import { describe, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/model/naming.ts';
import { GONE_AT } from '../../testkit/oracle.ts';
import { sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, useAudit } from '../support/audited.ts';
import { invariantProblemsOf, scene, tenantOwner, victimApp } from './support/tenant-scene.ts';

useAudit();

describe('the invariant check', () => {
  it('catches every kind of harm: a mark, a deletion, another owner, a re-pointed selector, another port', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(1), driverName: 'victim-driver', execIds: ['1'] });
    const other = tenantOwner(s, 'tenant-box');
    const name = executorServiceName(v.appId, '1');
    const original = s.h.emulator.getObject('services', NS, name)!;
    const harms: Array<[string, object]> = [
      ['marked gone', { metadata: { annotations: { [GONE_AT]: '2030-01-01T00:00:00Z' } } }],
      [
        'another owner',
        { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: other.metadata.name, uid: other.metadata.uid }] } },
      ],
      [
        'a second owner',
        {
          metadata: {
            ownerReferences: [
              ...(original['metadata'] as { ownerReferences: object[] }).ownerReferences,
              { apiVersion: 'v1', kind: 'Pod', name: other.metadata.name, uid: other.metadata.uid },
            ],
          },
        },
      ],
      ['re-pointed', { spec: { selector: { 'spark-app-selector': v.appId, 'spark-exec-id': '2' } } }],
      ['selects more', { spec: { selector: { 'spark-app-selector': v.appId, 'spark-exec-id': '1', extra: 'x' } } }],
      ['another port', { spec: { ports: [{ name: 'spark-block-manager', port: 7080, targetPort: 7080 }] } }],
    ];
    for (const [what, patch] of harms) {
      s.h.emulator.patchObject('services', NS, name, patch);
      expect(invariantProblemsOf(s.h, s.genuine), what).toHaveLength(1);
      s.h.emulator.deleteObject('services', NS, name);
      s.h.emulator.seed({ ...original, metadata: { ...(original['metadata'] as object), resourceVersion: undefined } });
      s.check(`restored after: ${what}`);
    }
    s.h.emulator.deleteObject('services', NS, name);
    expect(invariantProblemsOf(s.h, s.genuine)).toEqual([`Service ${name} of live executor ${v.execs.get('1')!.metadata.name}: missing`]);
  });
});
