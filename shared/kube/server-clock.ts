/**
 * The API server's clock, as its answers tell it: the one clock every instance of the function
 * shares (issue 17, class 8). A gone mark written by one instance and the end of its cool-down
 * judged by another are both read on it, so a skew between the instances' own clocks no longer
 * shortens (or lengthens) the cool-down.
 *
 * Every answer of kube-apiserver carries a `Date` header: Go's net/http sets it on each response
 * from the server's `time.Now()` (net/http server.go, chunkWriter.writeHeader: IMF-fixdate, RFC
 * 9110 §5.6.7 — whole seconds, truncated). So the server's clock read at least the Date when the
 * answer arrived, and less than the Date plus a second when the request was sent. The clock keeps
 * the highest such lower bound as an offset from the local clock and runs on by the local clock:
 * it is never ahead of the server's, its lag shrinks to the smallest fraction of a second any
 * answer showed, and the local clock's own offset cancels out. Only an answer whose upper bound is
 * below the estimate — the server's or the local clock was stepped — moves it back (a late answer
 * never does: its bound is from when it was sent). Every decision that marks or deletes follows a
 * fresh read in the same event, so it is judged just after an answer. Until the first answer (a
 * process's first read) it is the local clock.
 */
export interface Clock {
  now(): Date;
}

export class ServerClock implements Clock {
  /** Server time minus local time, in ms; undefined until the first answer. */
  private offsetMs: number | undefined;
  private readonly localNow: () => number;

  constructor(localNow: () => number = Date.now) {
    this.localNow = localNow;
  }

  /** Called as a request is sent; the function it returns takes the answer's `Date` header when the answer arrives. */
  exchange(): (date: string | undefined) => void {
    const sentAt = this.localNow();
    return (date) => this.observe(date, sentAt);
  }

  /** An answer's `Date` (absent or unreadable: nothing changes), for a request sent at `sentAt` on the local clock. */
  observe(date: string | undefined, sentAt: number): void {
    if (date === undefined) return;
    const serverMs = Date.parse(date);
    if (Number.isNaN(serverMs)) return;
    const atLeast = serverMs - this.localNow();
    const atMost = serverMs + DATE_RESOLUTION_MS - sentAt;
    const offset = this.offsetMs;
    if (offset === undefined || atLeast > offset || offset > atMost) this.offsetMs = atLeast;
  }

  /** Whether an answer has set it. */
  get synced(): boolean {
    return this.offsetMs !== undefined;
  }

  now(): Date {
    return new Date(this.localNow() + (this.offsetMs ?? 0));
  }
}

/** A `Date` is the server's time truncated to the second. */
const DATE_RESOLUTION_MS = 1_000;
