/**
 * Issue 18, "memory sized by what it must hold": what an executor's events cost when the process
 * remembers fewer executors than run (its memory limit is too small, or it restarted), against a
 * process whose memory was sized from the configuration (the Service cap × the watched namespaces).
 * A teardown walks the executors in order, so that through a memory smaller than the set every
 * event misses. The spec: a miss costs reads, never a create attempt on an update of a pod that
 * still runs (main: list, create → 409, get); memory sized for the cap never misses, so per
 * executor a teardown costs what it costs at 100 executors. The invariant is checked after every phase.
 */
import { describe, expect, it } from 'vitest';
import type { Harness } from '../../testkit/harness.ts';
import type { PodBody } from '../../testkit/spark-pods.ts';
import { sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import { app, check, currentIn, fail, ok, serviceWritesIn } from './support/steps.ts';

useAudit();

const EXECUTORS = 120;

interface Teardown {
  /** API calls of each "deletion started" update (the executor still runs: nothing to do). */
  readonly noOpCalls: number[];
  /** Create attempts those updates made. */
  readonly noOpCreates: number;
  /** API calls of the whole teardown (deletion started, failed, deleted), per executor. */
  readonly perExecutor: number;
}

async function scaleUpAndTearDown(h: Harness, seed: number): Promise<Teardown> {
  const a = app(h, sparkAppId(seed));
  const genuine = new Set<string>();
  const execs: PodBody[] = [];
  for (let id = 1; id <= EXECUTORS; id++) {
    const pod = a.exec(id);
    execs.push(pod);
    genuine.add(pod.metadata.name);
    await ok(h.send('add', pod), `add ${id}`);
  }
  check(h.emulator, genuine, 'scale-up');
  expect(h.services(NS).length, 'a Service per executor after the scale-up').toBe(EXECUTORS);
  const start = h.emulator.requests.length;
  const noOpCalls: number[] = [];
  let noOpCreates = 0;
  for (const pod of execs) {
    // kubectl delete / decommission: the deletion starts, the executor still runs and serves blocks.
    const deleting = { ...currentIn(h.emulator, pod.metadata.name) };
    deleting.metadata = { ...deleting.metadata, deletionTimestamp: new Date().toISOString() } as PodBody['metadata'];
    const before = h.emulator.requests.length;
    await ok(h.send('update', deleting), `deletion started ${pod.metadata.name}`);
    const calls = h.emulator.requests.slice(before);
    noOpCalls.push(calls.length);
    noOpCreates += serviceWritesIn(calls).filter((r) => r.verb === 'create').length;
  }
  check(h.emulator, genuine, 'deletions started');
  for (const pod of execs) {
    const failed = fail(h.emulator, pod);
    genuine.delete(pod.metadata.name);
    await ok(h.send('update', failed), `failed ${pod.metadata.name}`);
    h.emulator.deleteObject('pods', NS, pod.metadata.name);
    await ok(h.send('delete', failed), `deleted ${pod.metadata.name}`);
  }
  check(h.emulator, genuine, 'teardown');
  return { noOpCalls, noOpCreates, perExecutor: (h.emulator.requests.length - start) / EXECUTORS };
}

describe('an executor the process no longer remembers', () => {
  it('memory for a third of the executors: a "deletion started" update costs at most two reads and never a create', async () => {
    const h = await audited({}, { factLimits: { entries: 40, bytes: 40 * 3584 } });
    const t = await scaleUpAndTearDown(h, 1801);
    const mean = t.noOpCalls.reduce((s, n) => s + n, 0) / t.noOpCalls.length;
    console.log(
      `memory for 40 of ${EXECUTORS}: no-op update ${mean.toFixed(2)} calls (max ${Math.max(...t.noOpCalls)}), ${t.noOpCreates} create attempts; teardown ${t.perExecutor.toFixed(2)} calls/executor`,
    );
    expect(t.noOpCreates, 'create attempts by updates of executors that still run').toBe(0);
    expect(Math.max(...t.noOpCalls), 'calls of the costliest no-op update').toBeLessThanOrEqual(2);
  });

  it('memory sized from the configuration: no event misses, the teardown costs what it costs with a warm memory', async () => {
    const h = await audited();
    const t = await scaleUpAndTearDown(h, 1802);
    console.log(
      `memory sized for the cap: no-op update max ${Math.max(...t.noOpCalls)} calls; teardown ${t.perExecutor.toFixed(2)} calls/executor`,
    );
    expect(Math.max(...t.noOpCalls), 'calls of a no-op update').toBe(0);
    // Marking an ended executor's Service is one write; its peers' look and the delete add reads.
    expect(t.perExecutor, 'calls per executor for the whole teardown').toBeLessThanOrEqual(2.5);
  });
});
