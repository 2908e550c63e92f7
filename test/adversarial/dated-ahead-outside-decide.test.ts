/**
 * Found by the review of 051c4be ("a remembered fact dated ahead of now justifies nothing but a
 * read"), which applied the rule in decide.ts only. Two other remembered facts are dated on the same clock and aged by
 * `now - at < limit`, which a time dated ahead of now satisfies for as long as the step was:
 *  - ServiceCounts.remembered (COUNT_MAX_AGE_MS, 60 s): a remembered count lets creates through
 *    without a recount (other instances' creates unseen) — for an hour after an hour's step back;
 *  - plan.ts endedPeers (quietPeersMs, 10 s): a look that found no peer ended suppresses peer looks.
 *  - ServiceCounts.now: which count is newer was judged on the dating clock (now on the monotonic one).
 * All three failed on 87bec4d; they pass since the rule lives in shared/rules/observation.ts
 * (datedAheadOfNow) and is applied there too.
 */
import { describe, expect, it } from 'vitest';
import { ServiceCounts } from '../../shared/engine/service-count.ts';
import { podFact } from '../../shared/model/spark-pod.ts';
import { planExecutorEvent } from '../../shared/rules/plan.ts';
import { Pod } from '../../shared/model/k8s-objects.ts';

const HOUR_MS = 60 * 60_000;
const NOW = Date.parse('2026-12-05T12:00:00Z');

describe('review 051c4be: remembered facts dated ahead of now outside decide.ts', () => {
  it('a count taken an hour ahead (before the API server clock was set back) is not remembered two minutes later', () => {
    const counts = new ServiceCounts();
    counts.set('spark', 5, NOW + HOUR_MS);
    // Two minutes of real time later, on the corrected clock:
    expect(counts.remembered('spark', NOW + 2 * 60_000), 'trusted for an hour, not COUNT_MAX_AGE_MS').toBeUndefined();
  });

  it('a quiet peer look dated an hour ahead does not suppress the next ended executor’s peer look', () => {
    const pod = Pod.parse({
      metadata: {
        name: 'app-exec-5',
        namespace: 'spark',
        uid: 'u5',
        labels: { 'spark-role': 'executor', 'spark-app-selector': 'spark-0123456789abcdef', 'spark-exec-id': '5' },
      },
      spec: { containers: [{ name: 'c' }] },
      status: { phase: 'Failed' },
    });
    const hint = podFact(pod, 7079)!;
    const slot = { appId: hint.appId!, execId: '5' };
    const svc = (execId: string) => ({
      name: `svc-${execId}`,
      uid: `s${execId}`,
      resourceVersion: '1',
      ours: true,
      slot: { appId: slot.appId, execId },
      executor: { name: `app-exec-${execId}`, uid: `u${execId}` },
      owner: { name: 'driver', uid: 'd' },
      identity: {
        appId: slot.appId,
        execId,
        executor: { name: `app-exec-${execId}`, uid: `u${execId}` },
        owner: { name: 'driver', uid: 'd' },
      },
      goneAt: undefined,
      shape: '',
      selectorKeys: [],
      port: 7079,
    });
    const plan = planExecutorEvent(
      { hint, slot, goneHint: true },
      {
        service: svc('5') as never,
        // Found nothing ended, dated an hour ahead; 5 minutes have passed since on the corrected clock.
        lastPeerLook: { value: 0, at: NOW + HOUR_MS - 5 * 60_000 },
        serviceOf: (execId) => svc(execId) as never,
      },
      NOW,
    );
    expect(plan.peers.length, 'peers looked at (quiet period long over)').toBeGreaterThan(0);
  });

  it('a count whose epoch is dated ahead still sees this process’s creates counted since on the corrected clock', async () => {
    // View V1 counted 9 at epoch NOW+20 min (its first read, local clock ahead, or the API server's before a step back).
    const counts = new ServiceCounts();
    const v1 = await counts.count('spark', NOW + 20 * 60_000, async () => ({ count: 9, marked: [] }));
    // The clock steps back. View V2 counts afresh (9), and this process creates one Service (10 = the cap).
    await counts.count('spark', NOW, async () => ({ count: 9, marked: [] }));
    counts.adjust('spark', +1);
    // V1 decides now: the count it must see includes that create.
    const seen = counts.now('spark', { value: v1.value, at: NOW + 20 * 60_000, fresh: true, order: 1 }, v1.epoch);
    expect(seen.value, 'V1 sees the create made since (else it creates past the cap)').toBe(10);
  });
});
