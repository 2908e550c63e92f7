/**
 * Issue 17, class 5: MAX_SERVICES_PER_NAMESPACE across function instances (max-scale > 1). Each
 * instance remembers its count of our Services for up to 60 s, blind to the other instances'
 * creates: on main, two instances made 19 Services under a cap of 10. A create that would bring a
 * remembered count within MAX_SERVICES_RECOUNT_MARGIN of the cap counts afresh on the API server
 * first, so what is left over is only creates decided at the same moment by different instances
 * from the same fresh count (at most one per other instance when their events race).
 */
import { describe, expect, it } from 'vitest';
import { sparkAppId } from '../../testkit/spark-pods.ts';
import { audited, useAudit } from '../support/audited.ts';
import { app, check, instanceWithCaches, ok, ours, sendTo } from './support/steps.ts';

useAudit();

describe('issue 17, class 5: the cap holds across instances sharing one API server', () => {
  it('cap 10: instance B counted early, instance A fills the namespace, B’s next add does not pass the cap', async () => {
    const CAP = '10';
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: CAP, MAX_SERVICES_PER_APPLICATION: CAP });
    const other = await instanceWithCaches(h.emulator, { MAX_SERVICES_PER_NAMESPACE: CAP, MAX_SERVICES_PER_APPLICATION: CAP });
    try {
      const b = app(h, sparkAppId(5201));
      const b1 = b.exec(1);
      // B counts (0) and makes one Service; its count (1) is remembered for 60 s.
      await ok(sendTo(other.url, 'add', b1), 'instance B: add of b/1');
      expect(ours(h.emulator)).toBe(1);
      // A counts (1) and its first add of an application with 9 running executors makes 9.
      const a = app(h, sparkAppId(5202));
      const ea = Array.from({ length: 9 }, (_, k) => a.exec(k + 1));
      await ok(h.send('add', ea[0]!), 'instance A: first add of a (its window makes 9)');
      expect(ours(h.emulator), 'the namespace is at the cap').toBe(10);
      // B's application grows: 9 more running executors, B's add comes within its remembered count's minute.
      const eb = [b1, ...Array.from({ length: 9 }, (_, k) => b.exec(k + 2))];
      const reply = await ok(sendTo(other.url, 'add', eb[1]!), 'instance B: add of b/2');
      expect(ours(h.emulator), `Services of ours vs MAX_SERVICES_PER_NAMESPACE=${CAP} (B's reply: ${reply.text})`).toBeLessThanOrEqual(10);
      check(h.emulator, new Set([...ea, ...eb].map((p) => p.metadata.name)), 'two instances at the cap', 10);
    } finally {
      await other.close();
    }
  });
});
