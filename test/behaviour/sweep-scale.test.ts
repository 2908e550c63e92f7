/**
 * The sweep makes progress page by page: a namespace of 10,000 running executors whose events
 * were all lost is fully repaired over a bounded number of sweeps, each answered within its
 * deadline, and a sweep after that writes nothing.
 */
import { afterEach, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/model/naming.ts';
import type { Harness } from '../../testkit/harness.ts';
import { startHarness } from '../../testkit/harness.ts';
import { driverPod, executorPod } from '../../testkit/spark-pods.ts';
import { postSweep } from '../../testkit/apiserversource.ts';

const NS = 'spark';
const EXECUTORS = Number(process.env['SWEEP_SCALE_EXECUTORS'] ?? 10_000);
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

it(`repairs a namespace of ${EXECUTORS} executors over bounded sweeps, each within its deadline`, { timeout: 400_000 }, async () => {
  const deadlineMs = 10_000;
  h = await startHarness({
    SWEEP_DEADLINE_MS: String(deadlineMs),
    SWEEP_PAGE_SIZE: '500',
    MAX_SERVICES_PER_NAMESPACE: String(EXECUTORS + 10),
    MAX_SERVICES_PER_APPLICATION: String(EXECUTORS + 10),
    LOG_LEVEL: 'warn',
  });
  const appId = 'spark-5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e';
  const driver = h.createPod(driverPod({ namespace: NS, appId, name: 'big-driver' }));
  for (let i = 1; i <= EXECUTORS; i++) {
    h.createPod(
      executorPod({
        namespace: NS,
        appId,
        execId: String(i),
        name: `big-exec-${i}`,
        driver: { name: 'big-driver', uid: driver.metadata.uid! },
      }),
    );
  }
  const sweeps: Array<{ ms: number; reason: string | undefined }> = [];
  // At least 100 executors repaired per sweep on average, on a loaded 2-core machine.
  const bound = Math.ceil(EXECUTORS / 100) + 10;
  while (h.services(NS).length < EXECUTORS && sweeps.length < bound) {
    const started = performance.now();
    const reply = await postSweep(h.url, `sweep-${sweeps.length}`);
    const ms = performance.now() - started;
    expect(reply.status, reply.text).toBe(200);
    expect(ms).toBeLessThan(deadlineMs + 1_000);
    sweeps.push({ ms, reason: reply.data?.reason });
    if (process.env['SWEEP_SCALE_VERBOSE'] !== undefined) console.log(h.services(NS).length, Math.round(ms), reply.data?.reason);
  }
  expect(h.services(NS)).toHaveLength(EXECUTORS);
  expect(sweeps.length).toBeLessThanOrEqual(bound);
  expect(h.emulator.getObject('services', NS, executorServiceName(appId, String(EXECUTORS)))).toBeDefined();
  // Finish the round (the cursor may be mid-namespace), then one whole round writes nothing.
  h.emulator.resetRequests();
  for (let i = 0; i < bound; i++) {
    const reply = await postSweep(h.url, `again-${i}`);
    if (reply.data?.reason?.includes('goes on') !== true) break;
  }
  expect(h.emulator.requests.filter((r) => r.verb === 'create' || r.verb === 'patch' || r.verb === 'delete')).toEqual([]);
  console.log(
    `sweep-scale: ${EXECUTORS} executors repaired in ${sweeps.length} sweeps (${sweeps.map((s) => Math.round(s.ms)).join(', ')} ms)`,
  );
});
