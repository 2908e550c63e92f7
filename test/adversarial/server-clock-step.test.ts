/**
 * Issue 17, class 8, the API server's own clock stepped back (found by the review of the first-read
 * fix): the cluster's clock ran an hour ahead (NTP lost) and is set right. An instance that read
 * while it was ahead remembers executor 1 "runs" dated an hour in the future. Executor 1 ends and
 * another instance marks its Service on the corrected clock. At the cap, executor 3 needs room: the
 * remembered "runs" looks read an hour after the mark, and must not overrule it — the dead
 * executor's Service gives way (or stays marked) and executor 3 gets its Service. Both halves of the
 * invariant (testkit/oracle.ts) are read after every step.
 *
 * End to end this held before the rule too: every write here follows a fresh read (the give-way's
 * live lookup, the stale event answered from memory without a write). The rule itself — a fact
 * dated ahead of now justifies nothing but a read — is pinned by shared/rules/decide.test.ts's rows
 * "dated an hour ahead of now", which fail without it.
 */
import { describe, expect, it } from 'vitest';
import { sparkAppId } from '../../testkit/spark-pods.ts';
import { audited, NS, useAudit } from '../support/audited.ts';
import { addAtCapGivesWay, app, check, marked, ok, sendTo, svcName } from './support/steps.ts';

useAudit();

const HOUR_MS = 60 * 60_000;

describe('the API server’s clock stepped back by an hour between a read and a mark', () => {
  for (const cooldown of ['0', '300']) {
    it(`COOLDOWN_SECONDS=${cooldown}, cap 2: the dead executor 1's Service gives way to executor 3, never unmarked by a fact dated ahead`, async () => {
      const CAP = '2';
      const env = { COOLDOWN_SECONDS: cooldown, MAX_SERVICES_PER_NAMESPACE: CAP, MAX_SERVICES_PER_APPLICATION: CAP };
      let serverAheadMs = HOUR_MS;
      const h = await audited(env, { apiServerClock: () => new Date(Date.now() + serverAheadMs) });
      const b = await audited(env, { emulator: h.emulator });
      const a = app(h, sparkAppId(9_301));
      const e1 = a.exec(1);
      const e2 = a.exec(2);
      const live = new Set([e1.metadata.name, e2.metadata.name]);
      await ok(sendTo(b.url, 'add', e1), 'B: add of exec 1 while the API server’s clock is an hour ahead');
      await ok(sendTo(b.url, 'add', e2), 'B: add of exec 2');
      check(h.emulator, live, 'adds at B', 2);

      // The API server's clock is set right; executor 1 ends and instance A marks its Service.
      serverAheadMs = 0;
      h.emulator.deleteObject('pods', NS, e1.metadata.name);
      live.delete(e1.metadata.name);
      await ok(h.send('delete', e1), 'A: delete of exec 1');
      expect(marked(h.emulator, svcName(a.appId, 1)), 'exec 1’s Service marked').toBe(true);
      check(h.emulator, live, 'exec 1 ended', 2);

      // Executor 3 starts; its add reaches B, which remembers exec 1 "runs" an hour after the mark.
      // A late or forged "runs" event of executor 1 reaches B: what B remembers says the same, dated an hour after the mark.
      await ok(sendTo(b.url, 'update', e1), 'B: a stale update of exec 1 (Running)');
      expect(marked(h.emulator, svcName(a.appId, 1)), 'exec 1’s Service still marked after a stale event').toBe(true);
      check(h.emulator, live, 'stale update of exec 1 at B', 2);

      // Executor 3 is another application's: nothing of application A's window is listed for it.
      const other = app(h, sparkAppId(9_302), { driverName: 'other-driver' });
      const e3 = other.exec(3);
      live.add(e3.metadata.name);
      await addAtCapGivesWay(h.emulator, b.url, live, svcName(a.appId, 1), e3, 2);
    });
  }
});
