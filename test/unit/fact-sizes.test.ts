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
import { describe, expect, it, test } from 'vitest';
import { EXECUTOR_FACT_BYTES, sizeFactCache } from '../../shared/engine/memory.ts';
import { containerMemoryLimitBytes } from '../../shared/ops/memory-limit.ts';

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

describe('the memory limit the kernel enforces', () => {
  const files =
    (map: Record<string, string>) =>
    (path: string): string => {
      const text = map[path];
      if (text === undefined) throw new Error(`ENOENT: ${path}`);
      return text;
    };
  it.each([
    ['cgroup v2 with a limit (256Mi)', { '/sys/fs/cgroup/memory.max': '268435456\n' }, 268_435_456],
    ['cgroup v2 without one', { '/sys/fs/cgroup/memory.max': 'max\n' }, undefined],
    ['cgroup v1 with a limit', { '/sys/fs/cgroup/memory/memory.limit_in_bytes': '536870912\n' }, 536_870_912],
    ['cgroup v1 without one (page-rounded 2^63)', { '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n' }, undefined],
    ['no cgroup files', {}, undefined],
  ] as const)('%s', (_name, map, want) => {
    expect(containerMemoryLimitBytes(files(map))).toBe(want);
  });
});

describe('memory sized by what it must hold', () => {
  const MiB = 1024 * 1024;
  it('holds every executor the cap allows in every watched namespace when the limit has room', () => {
    const s = sizeFactCache({ maxServicesPerNamespace: 2000, namespaces: ['a', 'b', 'c'] }, 256 * MiB);
    expect(s.wanted).toBe(6000);
    expect(s.held).toBe(6000);
    expect(s.limits.entries).toBeGreaterThanOrEqual(6000);
    // The three kinds' bytes stay within the facts' third of the limit.
    expect(s.limits.bytes).toBeLessThanOrEqual(256 * MiB * (1 / 3));
  });
  it('holds fewer, and says so, when the limit is too small; without a limit, what the cap allows', () => {
    const small = sizeFactCache({ maxServicesPerNamespace: 2000, namespaces: ['a'] }, 16 * MiB);
    expect(small.held).toBeLessThan(small.wanted);
    expect(small.limits.bytes).toBeLessThanOrEqual((16 * MiB) / 3);
    const none = sizeFactCache({ maxServicesPerNamespace: 2000, namespaces: ['a'] }, undefined);
    expect(none.held).toBe(2000);
  });
});
