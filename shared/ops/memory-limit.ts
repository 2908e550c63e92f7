/**
 * The container's memory limit as the kernel enforces it (what `resources.limits.memory` becomes):
 * cgroup v2's memory.max, or cgroup v1's memory.limit_in_bytes. Undefined when there is none
 * ("max", or v1's near-2^63 "unlimited") or it cannot be read (not Linux, no cgroup mount).
 */
import { readFileSync } from 'node:fs';

const UNLIMITED_AT_LEAST = 2 ** 60;

export function containerMemoryLimitBytes(read: (path: string) => string = (path) => readFileSync(path, 'utf8')): number | undefined {
  for (const path of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    let text: string;
    try {
      text = read(path).trim();
    } catch {
      continue;
    }
    // "max" (v2) reads as NaN; v1's "unlimited" is a page-rounded 2^63.
    const bytes = Number(text);
    return Number.isFinite(bytes) && bytes > 0 && bytes < UNLIMITED_AT_LEAST ? bytes : undefined;
  }
  return undefined;
}
