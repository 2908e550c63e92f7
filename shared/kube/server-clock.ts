/**
 * The API server's clock, as its answers tell it: the one clock every instance of the function
 * shares (issue 17, class 8). A gone mark written by one instance and the end of its cool-down
 * judged by another are both read on it, so a skew between the instances' own clocks no longer
 * shortens (or lengthens) the cool-down.
 *
 * Every answer of kube-apiserver carries a `Date` header: Go's net/http sets it on each response
 * from the server's `time.Now()` (net/http server.go, chunkWriter.writeHeader: IMF-fixdate, RFC
 * 9110 §5.6.7 — whole seconds, truncated). So when an answer arrives the server's clock reads at
 * least its Date (and less than a second more, plus the answer's latency). The clock keeps the
 * highest such lower bound as an offset from the local clock and runs on by the local clock: it
 * is never ahead of the server's, answers never move it back, its lag behind the server shrinks to the smallest fraction of a second any
 * answer showed, and the local clock's own offset cancels out. An answer that shows the server's
 * clock well behind the estimate (the server's or the local clock was stepped) starts it afresh.
 * Every decision that marks or deletes follows a fresh read in the same event, so it is judged just
 * after an answer. Until the first answer (a process's first read) it is the local clock.
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

  /** An answer's `Date` header, taken as the answer arrives; absent or unreadable ones change nothing. */
  observe(date: string | undefined): void {
    if (date === undefined) return;
    const serverMs = Date.parse(date);
    if (Number.isNaN(serverMs)) return;
    const atLeast = serverMs - this.localNow();
    const offset = this.offsetMs;
    if (offset === undefined || atLeast > offset || atLeast + STEPPED_BACK_MS < offset) this.offsetMs = atLeast;
  }

  /** Whether an answer has set it. */
  get synced(): boolean {
    return this.offsetMs !== undefined;
  }

  now(): Date {
    return new Date(this.localNow() + (this.offsetMs ?? 0));
  }
}

/**
 * An answer whose Date is this far behind the estimate cannot be the truncation (< 1 s) and a
 * latency: one of the clocks was stepped back, and the estimate starts again from this answer.
 */
const STEPPED_BACK_MS = 2_000;
