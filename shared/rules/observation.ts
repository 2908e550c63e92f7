/**
 * What a fact is worth: when it was observed, whether it was read for this reconciliation, and
 * where its read stands among this reconciliation's reads. Every destructive rule of the rule
 * book rests on this (docs/reliability.md: "a gone fact comes only from a fresh read"; a read that
 * began before a Service was read proves nothing about the executor that Service records — that
 * executor may have started after it).
 *
 * The order is a counter, not a clock: a pod or list read takes its number when it begins, a
 * Service read when it ends, so that "this read began after that Service was read" is `>`.
 * Remembered facts are 0: before everything.
 */

/** A fact and where it came from. `at` is when it was read (epoch ms). */
export interface Observation<T> {
  readonly value: T;
  readonly at: number;
  /** Read during this reconciliation (not remembered from an earlier one). */
  readonly fresh: boolean;
  /** Where the read stands among this reconciliation's reads (0 = before all of them). */
  readonly order: number;
}

/** A fact remembered from an earlier reconciliation (or shared from a read that may predate this one): it may keep or create, never prove gone. */
/**
 * Times an observation carries are on the API server's clock (shared/kube/server-clock.ts), the one
 * clock every instance shares, read from its answers' whole-second `Date`: a time one instance read
 * and one another wrote may be up to about two seconds apart when they happened at once (each lags
 * the server by less than a second plus latency; a mark is truncated to the second).
 */
export const SHARED_CLOCK_UNCERTAINTY_MS = 2_500;

/**
 * A time more than that ahead of now was read before the API server's clock was set back (NTP
 * restored after it ran ahead; the ServerClock follows it back): it orders against nothing written
 * since and its age is unknown, so whatever is remembered with it justifies nothing but a read.
 */
export const datedAheadOfNow = (at: number, now: number): boolean => at > now + SHARED_CLOCK_UNCERTAINTY_MS;

export function remembered<T>(value: T, at: number): Observation<T> {
  return { value, at, fresh: false, order: 0 };
}

/** May this observation prove something gone about what a Service read at `serviceOrder` records? Only a fresh read begun after it. */
export function readAfter(seen: Pick<Observation<unknown>, 'fresh' | 'order'> | undefined, serviceOrder: number): boolean {
  return seen?.fresh === true && seen.order > serviceOrder;
}

/**
 * A read another event began is fresh for this round only if it began after the round did (else it
 * may predate the round's facts). Both on one monotonic clock: the clock decisions date by steps
 * when its first answer arrives.
 */
export function sharedReadIsFresh(readStartedAt: number, roundStartedAt: number): boolean {
  return readStartedAt > roundStartedAt;
}

/** The order stamps of one reconciliation's reads. */
export class ReadOrder {
  private seq = 0;
  private roundSeq = 0;
  private roundStartedAt = 0;

  /** The next stamp: take it when a pod or list read begins, or when a Service read ends. */
  next(): number {
    return ++this.seq;
  }

  /** A round of reads begins now (`now` on the process's monotonic clock, as shared reads' begunAt). */
  beginRound(now: number): void {
    this.roundStartedAt = now;
    this.roundSeq = this.next();
  }

  /** When the current round of reads began (monotonic ms). */
  get roundStart(): number {
    return this.roundStartedAt;
  }

  /**
   * The stamp of a read shared with another event that began in this round: the round's start,
   * before anything read in this round, so never after a Service read alongside it.
   */
  get roundStamp(): number {
    return this.roundSeq;
  }
}
