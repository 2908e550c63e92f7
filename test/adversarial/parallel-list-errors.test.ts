/**
 * Found holding by the review of 87bec4d: the window's Service list and the claimant pod list run in parallel
 * (Promise.all). When one fails the read fails with that error, the other settles in the
 * background, and nothing is left as an unhandled rejection (vitest fails a file on one). The
 * shared pod list stays usable by an event that joined it.
 */
import { describe, expect, it } from 'vitest';
import { stubReconcileContext } from '../../testkit/reconcile-context.ts';
import type { KubeClient, Page } from '../../shared/kube/client.ts';
import { KubeApiError } from '../../shared/kube/errors.ts';
import { Pod, type Service } from '../../shared/model/k8s-objects.ts';
import { podFact } from '../../shared/model/spark-pod.ts';
import { planExecutorEvent } from '../../shared/rules/plan.ts';
import { FactView } from '../../shared/engine/observe.ts';

const NS = 'spark';
const pod = (execId: string): Pod =>
  Pod.parse({
    metadata: {
      name: `app-exec-${execId}`,
      namespace: NS,
      uid: `uid-${execId}`,
      resourceVersion: '2',
      labels: { 'spark-role': 'executor', 'spark-app-selector': 'spark-0123456789abcdef', 'spark-exec-id': execId },
    },
    spec: { containers: [{ name: 'c' }] },
    status: { phase: 'Running' },
  });
const settle = (ms = 5): Promise<void> => new Promise((r) => setTimeout(r, ms));

function setup(failing: 'pods' | 'services') {
  const podLists: Array<{ resolve: (p: Page<Pod>) => void; reject: (e: unknown) => void }> = [];
  const svcLists: Array<{ resolve: (p: Page<Service>) => void; reject: (e: unknown) => void }> = [];
  const client = {
    listPods: () => new Promise<Page<Pod>>((resolve, reject) => podLists.push({ resolve, reject })),
    listServices: () => new Promise<Page<Service>>((resolve, reject) => svcLists.push({ resolve, reject })),
    readService: () => Promise.resolve(undefined),
  } as unknown as KubeClient;
  const ctx = stubReconcileContext(client, () => new Date('2026-12-05T12:00:00Z'));
  const view = (execId: string) => {
    const hint = podFact(pod(execId), 7079)!;
    const slot = { appId: hint.appId!, execId };
    const plan = planExecutorEvent({ hint, slot, goneHint: false, update: true }, { serviceOf: () => undefined }, Date.now());
    return { v: new FactView(ctx, { namespace: NS, slots: [slot], look: plan.look }), slot };
  };
  return { podLists, svcLists, view, failing };
}

describe('review 87bec4d: one of the two parallel lists fails', () => {
  for (const failing of ['pods', 'services'] as const) {
    it(`the ${failing} list fails: the read rejects with its error; no unhandled rejection; a joiner is not stuck`, async () => {
      const s = setup(failing);
      const a = s.view('1');
      const readA = a.v.read([{ kind: 'claimants', slot: a.slot }], []);
      const caughtA = readA.then(
        () => 'resolved',
        (e: unknown) => (e as Error).message,
      );
      await settle();
      expect(s.podLists.length).toBe(1);
      expect(s.svcLists.length).toBe(1);
      // Event B (exec 2, inside exec 1's window) joins exec 1's pod list.
      const b = s.view('2');
      const readB = b.v.read([{ kind: 'claimants', slot: b.slot }], []).then(
        () => 'resolved',
        (e: unknown) => (e as Error).message,
      );
      await settle();
      const err = new KubeApiError('list: boom', 500, 'InternalError', true, undefined);
      if (failing === 'services') {
        s.svcLists[0]!.reject(err);
        await settle();
        s.podLists[0]!.resolve({ items: [pod('1'), pod('2')], continueToken: undefined, skipped: [] });
      } else {
        s.podLists[0]!.reject(err);
        await settle();
        s.svcLists[0]!.resolve({ items: [], continueToken: undefined, skipped: [] });
        // B lists again itself (the shared list failed).
        await settle();
        s.podLists.at(-1)!.resolve({ items: [pod('2')], continueToken: undefined, skipped: [] });
        await settle();
        for (const l of s.svcLists.slice(1)) l.resolve({ items: [], continueToken: undefined, skipped: [] });
      }
      expect(await caughtA).toBe('list: boom');
      expect(await readB).toBe('resolved');
      await settle(20);
    });
  }
});
