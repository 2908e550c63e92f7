/**
 * Issue 18, "memory sized by what it must hold": the bytes the fact caches count for an entry
 * (shared/ops/bounded-lru.ts estimateBytes and the entry overhead) are checked against the live
 * heap that entry really takes, measured in a process of its own after a full GC, for facts named
 * as Spark names them. An estimate far above the heap makes the cache hold fewer executors than
 * its memory allows (main's estimate was ≈ 2× the heap); one below it lets memory outgrow the
 * bound. The room each executor is given (EXECUTOR_FACT_BYTES) must cover what was measured.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { EXECUTOR_FACT_BYTES } from '../../shared/engine/memory.ts';

const script = fileURLToPath(new URL('../support/fact-heap.ts', import.meta.url));

test('each kind of fact is estimated within -10 %/+35 % of its live heap, and fits the room it is given', () => {
  const out = execFileSync(process.execPath, ['--expose-gc', script, '20000'], { encoding: 'utf8', timeout: 120_000 });
  const measured = JSON.parse(out) as Record<keyof typeof EXECUTOR_FACT_BYTES, { realPerEntry: number; estimatedPerEntry: number }>;
  for (const kind of ['pods', 'services', 'claimants'] as const) {
    const { realPerEntry, estimatedPerEntry } = measured[kind];
    const ratio = estimatedPerEntry / realPerEntry;
    expect(ratio, `${kind}: estimated ${estimatedPerEntry} B, live heap ${realPerEntry} B per entry`).toBeGreaterThanOrEqual(0.9);
    expect(ratio, `${kind}: estimated ${estimatedPerEntry} B, live heap ${realPerEntry} B per entry`).toBeLessThanOrEqual(1.35);
    expect(EXECUTOR_FACT_BYTES[kind], `${kind}: room per executor vs live heap`).toBeGreaterThanOrEqual(realPerEntry);
  }
});
