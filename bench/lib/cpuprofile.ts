/**
 * Reads a V8 .cpuprofile (node --cpu-prof) and says where the self time went, grouped the way
 * the overhead question is asked: our code, zod, cloudevents, client-node, undici, node:http, GC…
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

export interface ProfileSummary {
  readonly totalMs: number;
  /** Self time per group, ms, largest first. */
  readonly groups: ReadonlyArray<{ readonly group: string; readonly ms: number; readonly share: number }>;
  /** The heaviest functions by self time. */
  readonly functions: ReadonlyArray<{ readonly fn: string; readonly ms: number; readonly share: number }>;
}

export function groupOf(url: string, functionName: string): string {
  if (url === '') {
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(garbage collector)') return 'GC';
    if (functionName === '(program)') return 'V8/native (program)';
    return `native: ${functionName}`;
  }
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (nm !== null) return nm[1]!;
  if (url.includes('/shared/')) return 'ours: shared/';
  if (url.includes('/functions/')) return 'ours: functions/';
  if (url.startsWith('node:internal/deps/undici')) return 'node: undici (fetch)';
  if (url.startsWith('node:internal/http') || url.startsWith('node:_http') || url === 'node:http') return 'node: http';
  if (url.startsWith('node:internal/streams') || url === 'node:stream') return 'node: streams';
  if (url.startsWith('node:internal/modules') || url.startsWith('node:internal/bootstrap')) return 'node: module loading';
  if (url.startsWith('node:')) return 'node: other';
  return url;
}

/** CLOCK_MONOTONIC in µs, the clock V8 stamps profile samples with on Linux. */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

/**
 * Self time by group and by function; with `window` (monotonic µs, see monotonicUs) only the
 * samples taken inside it count, e.g. the timed part of a run without start-up and warm-up.
 */
export function summarizeProfile(file: string, window?: { readonly fromUs: number; readonly toUs: number }, top = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const self = new Map<number, number>();
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (window !== undefined && (at < window.fromUs || at > window.toUs)) continue;
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + delta);
  }
  const groups = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  for (const node of profile.nodes) {
    const us = self.get(node.id) ?? 0;
    if (us === 0) continue;
    const { url, functionName, lineNumber } = node.callFrame;
    const group = groupOf(url, functionName);
    if (group === 'idle') continue;
    busy += us;
    groups.set(group, (groups.get(group) ?? 0) + us);
    const short = url.replace(/^file:\/\/.*?node_modules\//, '').replace(/^file:\/\/.*?\/(shared|functions)\//, '$1/');
    const key = `${functionName || '(anonymous)'} ${short}${url === '' ? '' : `:${lineNumber + 1}`}`;
    functions.set(key, (functions.get(key) ?? 0) + us);
  }
  const toRows = <K extends string>(map: Map<string, number>, key: K) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(
        ([name, us]) =>
          ({ [key]: name, ms: Math.round(us / 100) / 10, share: Math.round((us / busy) * 1000) / 10 }) as { [P in K]: string } & {
            ms: number;
            share: number;
          },
      );
  return { totalMs: Math.round(busy / 1000), groups: toRows(groups, 'group'), functions: toRows(functions, 'fn') };
}
