/**
 * Run as `node --expose-gc test/support/fact-heap.ts <n>`: fills a FactCache (no limits) with n
 * executors' facts of each kind in turn and prints, per kind, the live heap per entry after a
 * full GC beside the cache's own estimate (JSON on stdout). A process of its own, so that nothing
 * else allocates between the two heap readings.
 */
import { executorFacts } from '../../bench/lib/fact-samples.ts';
import { FactCache, podKey, slotCacheKey } from '../../shared/engine/memory.ts';
import { executorServiceName } from '../../shared/model/naming.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const heapUsed = (): number => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};
const n = Number(process.argv[2] ?? 20_000);
const kinds = ['pods', 'services', 'claimants'] as const;
const result: Record<string, { realPerEntry: number; estimatedPerEntry: number }> = {};
/** One kind's bytes per entry; a function of its own so that nothing of it outlives the call. */
function measure(kind: (typeof kinds)[number]): { realPerEntry: number; estimatedPerEntry: number } {
  const facts = new FactCache({ entries: n, bytes: Number.MAX_SAFE_INTEGER });
  executorFacts(0);
  const before = heapUsed();
  for (let i = 0; i < n; i++) {
    const f = executorFacts(i);
    const at = Date.now();
    if (kind === 'pods') facts.pods.set(podKey(f.namespace, f.pod.name), { value: f.pod, at });
    if (kind === 'services') facts.services.set(podKey(f.namespace, executorServiceName(f.appId, f.execId)), { value: f.service, at });
    if (kind === 'claimants') facts.claimants.set(slotCacheKey(f.namespace, f.appId, f.execId), { value: f.claimants, at });
  }
  const real = (heapUsed() - before) / n;
  if (facts[kind].size !== n) throw new Error(`${kind}: ${facts[kind].size} of ${n} kept`);
  return { realPerEntry: Math.round(real), estimatedPerEntry: Math.round(facts[kind].bytes / n) };
}

// The first pass warms the code up (its own allocations would count); the second is reported.
for (const kind of kinds) measure(kind);
for (const kind of kinds) result[kind] = measure(kind);
process.stdout.write(`${JSON.stringify(result)}\n`);
