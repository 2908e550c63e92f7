/**
 * The ordering rule every destructive decision rests on (docs/reliability.md, "Reads are ordered,
 * not snapshots"): within one reconciliation, a fact that something is gone counts only if its
 * read began after the Service it is compared with was read — an executor may start in between.
 * Remembered facts never prove anything gone ("a fact that something is gone is only taken from a
 * read made for the decision that uses it").
 *
 * The properties build random interleavings of concurrent reads (each a start and an end) and
 * compare the stamps' verdict with the timeline itself: "began after that Service read ended".
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReadOrder, readAfter, remembered, sharedReadIsFresh } from './observation.ts';

type Kind = 'service' | 'pod';
interface Step {
  readonly read: number;
  readonly edge: 'start' | 'end';
}

/** n reads of random kinds, their starts and ends interleaved at random (each start before its end). */
const interleavings = fc.array(fc.constantFrom<Kind>('service', 'pod'), { minLength: 2, maxLength: 8 }).chain((kinds) =>
  fc.array(fc.nat(), { minLength: kinds.length * 2, maxLength: kinds.length * 2 }).map((keys) => {
    // A random order of the 2n edges, then each read's first edge is its start.
    const edges = keys.map((key, i) => ({ key, read: i % kinds.length })).sort((a, b) => a.key - b.key || a.read - b.read);
    const seen = new Set<number>();
    const steps: Step[] = edges.map(({ read }) => {
      const edge = seen.has(read) ? 'end' : 'start';
      seen.add(read);
      return { read, edge };
    });
    return { kinds, steps };
  }),
);

describe('the order of reads within one reconciliation', () => {
  it('a pod read proves something gone about a Service read exactly when it began after that read ended', () => {
    fc.assert(
      fc.property(interleavings, ({ kinds, steps }) => {
        const order = new ReadOrder();
        const stamp = new Map<number, number>();
        const at = new Map<string, number>();
        steps.forEach((step, position) => {
          at.set(`${step.read}/${step.edge}`, position);
          // The rule of the stamps: a pod (or list) read is numbered when it begins, a Service read when it ends.
          if ((kinds[step.read] === 'pod' && step.edge === 'start') || (kinds[step.read] === 'service' && step.edge === 'end'))
            stamp.set(step.read, order.next());
        });
        kinds.forEach((podKind, pod) => {
          if (podKind !== 'pod') return;
          kinds.forEach((serviceKind, service) => {
            if (serviceKind !== 'service') return;
            const beganAfter = at.get(`${pod}/start`)! > at.get(`${service}/end`)!;
            expect(readAfter({ fresh: true, order: stamp.get(pod)! }, stamp.get(service)!)).toBe(beganAfter);
          });
        });
      }),
    );
  });

  it('a remembered fact, or a read not made for this reconciliation, never proves anything gone', () => {
    fc.assert(
      fc.property(fc.nat(), fc.nat(), fc.anything(), (serviceOrder, readOrder, value) => {
        expect(readAfter(remembered(value, readOrder), serviceOrder)).toBe(false);
        expect(readAfter({ fresh: false, order: readOrder }, serviceOrder)).toBe(false);
        expect(readAfter(undefined, serviceOrder)).toBe(false);
      }),
    );
  });

  it('a read shared with another event is fresh only if it began after this round began', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1e6 }), fc.integer({ min: 0, max: 1e6 }), (readStarted, roundStarted) => {
        expect(sharedReadIsFresh(readStarted, roundStarted)).toBe(readStarted > roundStarted);
      }),
    );
  });

  it('a shared read stamped at its round’s start stands before every read of that round and after every earlier one', () => {
    fc.assert(
      fc.property(fc.nat({ max: 5 }), fc.nat({ max: 5 }), (before, during) => {
        const order = new ReadOrder();
        const earlier = Array.from({ length: before }, () => order.next());
        order.beginRound(1_000);
        const later = Array.from({ length: during }, () => order.next());
        for (const e of earlier) expect(order.roundStamp).toBeGreaterThan(e);
        for (const l of later) expect(order.roundStamp).toBeLessThan(l);
        expect(order.roundStart).toBe(1_000);
      }),
    );
  });
});
