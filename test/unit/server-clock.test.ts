/**
 * The API server's clock as the function reads it (issue 17, class 8): from answers' `Date`
 * headers, which carry the server's time truncated to the second (RFC 9110 IMF-fixdate, as Go's
 * net/http writes it). A simulated server clock and a local clock that runs at the same rate with
 * an offset of its own.
 */
import { describe, expect, it } from 'vitest';
import { ServerClock } from '../../shared/kube/server-clock.ts';

/** A server whose clock is `serverMs`, and a local clock `skewMs` away from it. */
function world(skewMs: number) {
  const w = { serverMs: Date.parse('2026-12-04T12:00:00.000Z') };
  const clock = new ServerClock(() => w.serverMs + skewMs);
  const date = (): string => new Date(Math.floor(w.serverMs / 1000) * 1000).toUTCString();
  /** A request sent and answered at once (the Date of the server's time now). */
  const answer = (): void => clock.observe(date(), w.serverMs + skewMs);
  return { w, clock, date, answer, lagMs: () => w.serverMs - clock.now().getTime() };
}

describe('ServerClock: the API server’s time from its answers’ Date', () => {
  it('before any answer it is the local clock', () => {
    const { clock, lagMs } = world(-42_000);
    expect(clock.synced).toBe(false);
    expect(lagMs()).toBe(42_000);
  });

  it.each([
    ['20 min ahead', 20 * 60_000],
    ['13 min behind', -13 * 60_000],
    ['no skew', 0],
  ])('a local clock %s: after an answer it reads the server’s time, never ahead, less than a second behind', (_, skew) => {
    const { w, clock, answer, lagMs } = world(skew);
    w.serverMs += 730; // the answer is generated at 12:00:00.730: its Date says 12:00:00
    answer();
    expect(clock.synced).toBe(true);
    expect(lagMs()).toBe(730);
    w.serverMs += 5_000; // runs on by the local clock between answers
    expect(lagMs()).toBe(730);
  });

  it('answers over a second boundary shrink the lag; a truncated Date never moves it back', () => {
    const { w, answer, lagMs } = world(3_000);
    w.serverMs += 900;
    answer();
    expect(lagMs()).toBe(900);
    w.serverMs += 150; // 12:00:01.050
    answer();
    expect(lagMs()).toBe(50);
    w.serverMs += 900; // 12:00:01.950: Date 12:00:01, 950 ms behind — the truncation, not a step
    answer();
    expect(lagMs()).toBe(50);
  });

  it('an answer that arrives late (its Date seconds old) does not move it back', () => {
    const { w, clock, date, answer, lagMs } = world(-7_000);
    w.serverMs += 400;
    answer();
    const sentAt = w.serverMs - 7_000;
    const late = date(); // generated now …
    w.serverMs += 4_500; // … and read 4.5 s later (a loaded process, a slow network)
    clock.observe(late, sentAt);
    expect(lagMs()).toBe(400);
  });

  it('a server clock stepped back is followed at the next answer; stepped forward, too', () => {
    const { w, answer, lagMs } = world(0);
    answer();
    w.serverMs -= 10 * 60_000;
    answer();
    expect(lagMs()).toBe(0);
    w.serverMs += 60 * 60_000;
    answer();
    expect(lagMs()).toBe(0);
  });

  it('answers without a readable Date change nothing', () => {
    const { w, clock, answer, lagMs } = world(5_000);
    answer();
    clock.observe(undefined, w.serverMs + 5_000);
    clock.observe('not a date', w.serverMs + 5_000);
    clock.observe('', w.serverMs + 5_000);
    w.serverMs += 1_000;
    expect(lagMs()).toBe(0);
  });
});
