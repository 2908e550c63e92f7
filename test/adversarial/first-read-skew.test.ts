/**
 * Found by an adversarial review (issue 17 classes 4 and 8 together): a new function instance whose own clock runs
 * 20 minutes ahead stamps its first read with that clock (the ServerClock is the local clock until
 * the first answer, shared/kube/server-clock.ts). What it remembers of executor 1 ("runs") then
 * looks read 20 minutes later than it was. Executor 1 ends and another instance marks its Service.
 * At the cap, executor 3 needs room: the dead executor 1's Service must give way (or at least
 * stay marked); a remembered "runs" read before the executor ended must not overrule the mark
 * (docs/reliability.md: anything that could hurt needs fresh facts; testkit/oracle.ts both halves).
 */
import { describe, expect, it } from 'vitest';
import { sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import { addAtCapGivesWay, app, check, marked, ok, sendTo, svcName } from './support/steps.ts';

useAudit();

const AHEAD_MS = 20 * 60_000;

describe('a first read stamped by a local clock ahead of the API server', () => {
  for (const cooldown of ['0', '300']) {
    it(`COOLDOWN_SECONDS=${cooldown}, cap 2: the dead executor 1's Service gives way to executor 3, never unmarked`, async () => {
      const CAP = '2';
      const env = { COOLDOWN_SECONDS: cooldown, MAX_SERVICES_PER_NAMESPACE: CAP, MAX_SERVICES_PER_APPLICATION: CAP };
      const h = await audited(env);
      // Instance B starts with its own clock 20 min ahead of the API server's.
      const b = await audited(env, { emulator: h.emulator, localClock: () => new Date(Date.now() + AHEAD_MS) });
      try {
        const a = app(h, sparkAppId(9_201));
        const e1 = a.exec(1);
        const e2 = a.exec(2);
        const live = new Set([e1.metadata.name, e2.metadata.name]);
        await ok(sendTo(b.url, 'add', e1), 'B (first event of its process): add of exec 1');
        check(h.emulator, live, 'add at B', 2);
        // Executor 1 ends; instance A marks its Service.
        h.emulator.deleteObject('pods', NS, e1.metadata.name);
        live.delete(e1.metadata.name);
        await ok(h.send('delete', e1), 'A: delete of exec 1');
        expect(marked(h.emulator, svcName(a.appId, 1)), 'exec 1’s Service marked').toBe(true);
        check(h.emulator, live, 'exec 1 ended', 2);
        // Executor 3 starts; its add reaches B, at the cap.
        const e3 = a.exec(3);
        live.add(e3.metadata.name);
        await addAtCapGivesWay(h.emulator, b.url, live, svcName(a.appId, 1), e3, 2);
      } finally {
        await b.close();
      }
    });
  }
});
