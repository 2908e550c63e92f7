/**
 * A read another event began earlier, shared by a later round: it may predate what that round
 * read, so it counts as fresh only if it began after the round did (docs/reliability.md: "a gone
 * fact comes only from a fresh read"). "Began after" is a question of this process's own order
 * of events. The clock decisions date by is the API server's (shared/kube/server-clock.ts): until
 * its first answer it is the local clock, and one 20 minutes ahead steps back when that answer
 * arrives. A read begun before the step then looks 20 minutes younger than a round begun after it.
 * Found open by the review of issue 17 class 8.
 */
import { describe, expect, it } from 'vitest';
import { stubReconcileContext } from '../../testkit/reconcile-context.ts';
import type { KubeClient, Page } from '../kube/client.ts';
import { Pod, type Service } from '../model/k8s-objects.ts';
import { podFact } from '../model/spark-pod.ts';
import { planExecutorEvent } from '../rules/plan.ts';
import { FactView } from './observe.ts';

const NS = 'spark';
const NAME = 'app-exec-1';

function runningExecutor(): Pod {
  return Pod.parse({
    metadata: {
      name: NAME,
      namespace: NS,
      uid: 'uid-exec-1',
      resourceVersion: '2',
      labels: { 'spark-role': 'executor', 'spark-app-selector': 'spark-0123456789abcdef', 'spark-exec-id': '1' },
    },
    spec: { containers: [{ name: 'c' }] },
    status: { phase: 'Running' },
  });
}

/** Only pod reads, each answered when the test says so. */
function pendingReads(): { client: KubeClient; answers: Array<(pod: Pod | undefined) => void> } {
  const answers: Array<(pod: Pod | undefined) => void> = [];
  const refuse = (): never => {
    throw new Error('not used by this test');
  };
  const client = {
    readPod: () => new Promise<Pod | undefined>((resolve) => answers.push(resolve)),
    listPods: refuse,
    readService: refuse,
    listServices: refuse,
    createService: refuse,
    patchService: refuse,
    deleteService: refuse,
  } as unknown as KubeClient;
  return { client, answers };
}

const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 5));

describe('a shared pod read begun before a round, across a step of the dating clock', () => {
  for (const [name, stepMs] of [
    ['the clock steps back 20 min (its first answer: the local clock was ahead)', -20 * 60_000],
    ['the clock does not move', 0],
  ] as const) {
    it(`${name}: the later round does not take the earlier read's "absent" as fresh; it reads again`, async () => {
      const { client, answers } = pendingReads();
      let clock = Date.parse('2026-12-05T12:00:00Z');
      const ctx = stubReconcileContext(client, () => new Date(clock));
      const request = { namespace: NS, slots: [] };
      const first = new FactView(ctx, request);
      const firstRead = first.read([{ kind: 'pod', name: NAME }], []);
      await settle();
      // The dating clock steps (or not); then another event's round begins and joins the read under way.
      clock += stepMs;
      await settle();
      const second = new FactView(ctx, request);
      const secondRead = second.read([{ kind: 'pod', name: NAME }], []);
      await settle();
      expect(answers.length, 'one read under way, shared').toBe(1);
      // The earlier read finds no pod (its executor was not created yet); by now it runs.
      answers[0]!(undefined);
      await settle();
      expect(answers.length, 'the later round reads the pod itself').toBe(2);
      answers[1]!(runningExecutor());
      await Promise.all([firstRead, secondRead]);
      const seen = second.facts([]).pods.get(NAME);
      expect(seen?.fresh).toBe(true);
      expect(seen?.value, 'what the later round may decide from').not.toBe('absent');
    });
  }
});

// Issue 18: an update whose Service the process does not remember reads the Services of the slots
// its list finds claimed before it decides (never a create that fails with 409). Which Services
// those are needs no pod: the list of them by exec id goes out with the list of the pods — one
// round trip per batch instead of two. An add keeps the optimistic create and reads no Service.
describe('the Services an update must read before it decides, read with its claimant list', () => {
  for (const update of [true, false]) {
    it(`${update ? 'an update' : 'an add'} of a running executor the process knows nothing of: ${update ? 'the window’s Services are listed while the pods are' : 'no Service is read'}`, async () => {
      const calls: string[] = [];
      const podLists: Array<(page: Page<Pod>) => void> = [];
      const client = {
        listPods: (_ns: string, selector: string) => {
          calls.push(`list pods ${selector}`);
          return new Promise<Page<Pod>>((resolve) => podLists.push(resolve));
        },
        listServices: (_ns: string, selector: string) => {
          calls.push(`list services ${selector}`);
          return Promise.resolve<Page<Service>>({ items: [], continueToken: undefined, skipped: [] });
        },
        readService: (_ns: string, name: string) => {
          calls.push(`get service ${name}`);
          return Promise.resolve(undefined);
        },
      } as unknown as KubeClient;
      const ctx = stubReconcileContext(client, () => new Date('2026-12-05T12:00:00Z'));
      const hint = podFact(runningExecutor(), 7079)!;
      const slot = { appId: hint.appId!, execId: hint.execId! };
      const plan = planExecutorEvent({ hint, slot, goneHint: false, update }, { serviceOf: () => undefined }, Date.now());
      const view = new FactView(ctx, { namespace: NS, slots: [slot], look: plan.look });
      const read = view.read([{ kind: 'claimants', slot }], []);
      await settle();
      // The pod list is still unanswered.
      expect(calls.filter((c) => c.startsWith('list pods')).length).toBe(1);
      expect(calls.filter((c) => c.startsWith('list services')).length, 'Service lists sent before the pods are known').toBe(
        update ? 1 : 0,
      );
      podLists[0]!({ items: [runningExecutor()], continueToken: undefined, skipped: [] });
      await read;
      expect(view.claimedUnknownServices([slot]), 'nothing left to read before deciding').toEqual(update ? [] : [slot]);
      expect(
        calls.filter((c) => c.startsWith('get service')),
        'no Service read by name',
      ).toEqual([]);
    });
  }
});
