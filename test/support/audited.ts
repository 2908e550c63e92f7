/**
 * Shared by the reliability suites: harnesses that are audited after every test, and the audit
 * itself. The audit reads the emulator's request log (every HTTP request that reached it) and
 * fails the test if the function ever wrote a pod, acted outside its namespaces, used an
 * endpoint other than namespaced pods/services, or wrote to a Service it does not own.
 */
import { afterEach, expect } from 'vitest';
import type { KubeEmulator } from '../../packages/kube-emulator/index.ts';
import { type Harness, type HarnessOptions, startHarness } from '../../testkit/harness.ts';
import { type AuditScope, auditRequests } from '../../testkit/audit.ts';

export { type AuditScope, auditRequests };

export const NS = 'spark';

interface Audited {
  readonly emulator: KubeEmulator;
  readonly scope: AuditScope;
}

const auditList: Audited[] = [];
const harnesses: Harness[] = [];
let totalAudited = 0;

/**
 * Registers the after-each audit + cleanup for the calling test file. Tests start harnesses
 * with `audited()` and seed foreign Services with `addForeign()`.
 */
export function useAudit(): void {
  afterEach(async () => {
    const seenEmulators = new Set<KubeEmulator>();
    try {
      for (const a of auditList) {
        if (seenEmulators.has(a.emulator)) continue;
        seenEmulators.add(a.emulator);
        const scopes = auditList.filter((x) => x.emulator === a.emulator);
        const merged: AuditScope = {
          namespaces: [...new Set(scopes.flatMap((s) => s.scope.namespaces))],
          foreign: scopes.flatMap((s) => s.scope.foreign ?? []),
        };
        totalAudited += a.emulator.requests.length;
        expect(auditRequests(a.emulator.requests, merged), 'security audit of the emulator request log').toEqual([]);
      }
    } finally {
      auditList.length = 0;
      const closing = harnesses.splice(0);
      // Instances sharing an emulator first, the owner of the emulator last.
      for (const h of closing.reverse()) await h.close();
    }
  });
}

/** How many API requests the audits of this file have checked so far. */
export function auditedRequestCount(): number {
  return totalAudited;
}

/** startHarness, with its emulator's request log audited and the harness closed after the test. */
export async function audited(env: Record<string, string> = {}, opts: HarnessOptions = {}): Promise<Harness> {
  const h = await startHarness(env, opts);
  harnesses.push(h);
  auditList.push({ emulator: h.emulator, scope: { namespaces: h.config.namespaces } });
  return h;
}

/** Audits one harness's emulator now and closes it (long loops: do not keep hundreds of servers open). */
export async function auditAndClose(...group: Harness[]): Promise<void> {
  const emulator = group[0]!.emulator;
  const scopes = auditList.filter((a) => a.emulator === emulator);
  const merged: AuditScope = {
    namespaces: [...new Set(scopes.flatMap((s) => s.scope.namespaces))],
    foreign: scopes.flatMap((s) => s.scope.foreign ?? []),
  };
  totalAudited += emulator.requests.length;
  for (let i = auditList.length - 1; i >= 0; i--) if (auditList[i]!.emulator === emulator) auditList.splice(i, 1);
  for (const h of group) harnesses.splice(harnesses.indexOf(h), 1);
  try {
    expect(auditRequests(emulator.requests, merged), 'security audit of the emulator request log').toEqual([]);
  } finally {
    for (const h of [...group].reverse()) await h.close();
  }
}

/** Declares Services of someone else in this emulator: any write to them fails the audit. */
export function addForeign(emulator: KubeEmulator, services: ReadonlyArray<{ namespace: string; name: string }>): void {
  auditList.push({ emulator, scope: { namespaces: [], foreign: services } });
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Log lines of the function at or above `level` whose JSON mentions `text`. */
export function logsMatching(h: Harness, text: RegExp, levels: readonly string[] = ['warn', 'error']): Array<Record<string, unknown>> {
  return h.logs.filter(
    (l) => levels.includes(String(l['level'])) && Object.values(l).some((v) => text.test(typeof v === 'string' ? v : JSON.stringify(v))),
  );
}
