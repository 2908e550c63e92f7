/**
 * proof/fast-fail/spark-fetch-model.ts against figures worked out by hand from Spark's rules
 * (v3.5.0; rule numbers as in the module's header):
 *   1. a dropped connect costs the connect timeout (120 s by default, 10 s when tuned);
 *   2. every failed connect asks the driver; "dead" fails the peer at once, without retry;
 *   3. otherwise a retry follows retryWait (5 s) later, up to maxRetries (3) retries;
 *   4. the task thread makes the first attempt at each peer, one after another;
 *   5. the task throws at the first final failure, once its first wave is sent.
 */
import { describe, expect, it } from 'vitest';
import {
  SPARK_DEFAULT_CONF,
  SPARK_TUNED_CONF,
  peerChain,
  scaleConf,
  taskGiveUp,
  uniformPeers,
} from '../../proof/fast-fail/spark-fetch-model.ts';

const S = 1000;
const KNOWS = 0;
const UNAWARE = Number.POSITIVE_INFINITY;
const dropped = { kind: 'dropped' } as const;

describe('Spark defaults as documented', () => {
  it('120 s connect timeout, 3 retries, 5 s retryWait', () => {
    expect(SPARK_DEFAULT_CONF).toEqual({ connectTimeoutMs: 120 * S, maxRetries: 3, retryWaitMs: 5 * S });
    expect(SPARK_TUNED_CONF.connectTimeoutMs).toBe(10 * S);
    expect(SPARK_TUNED_CONF.retryWaitMs).toBe(5 * S);
  });
});

describe('one lost peer behind a vanished pod IP', () => {
  it('driver unaware: 4 connects of 120 s and 3 waits of 5 s = 495 s', () => {
    const r = taskGiveUp(uniformPeers(1, dropped), SPARK_DEFAULT_CONF, UNAWARE);
    expect(r.giveUpMs).toBe(495 * S);
    expect(r.failingPeerConnects).toBe(4);
    expect(r.chains[0]?.reason).toBe('retries-exhausted');
    expect(r.boundBy).toBe('retry-chain');
  });

  it('attempts start at 0, 125, 250 and 375 s', () => {
    const ch = peerChain(0, 0, { outcome: dropped }, SPARK_DEFAULT_CONF, UNAWARE);
    expect(ch.attempts.map((a) => a.startMs)).toEqual([0, 125 * S, 250 * S, 375 * S]);
    expect(ch.attempts.map((a) => a.endMs)).toEqual([120 * S, 245 * S, 370 * S, 495 * S]);
  });

  it('driver knows: the first connect (120 s), then ExecutorDeadException, no retry', () => {
    const r = taskGiveUp(uniformPeers(1, dropped), SPARK_DEFAULT_CONF, KNOWS);
    expect(r.giveUpMs).toBe(120 * S);
    expect(r.failingPeerConnects).toBe(1);
    expect(r.chains[0]?.reason).toBe('executor-dead');
  });

  it('maxRetries=0: one connect, then the IOException is final', () => {
    const r = taskGiveUp(uniformPeers(1, dropped), { ...SPARK_DEFAULT_CONF, maxRetries: 0 }, UNAWARE);
    expect(r.giveUpMs).toBe(120 * S);
    expect(r.chains[0]?.reason).toBe('retries-exhausted');
  });
});

describe('five lost peers behind vanished pod IPs (first connects one after another on the task thread)', () => {
  it('defaults, driver knows: 5 x 120 s = 600 s, although peer 1 failed for good at 120 s', () => {
    const r = taskGiveUp(uniformPeers(5, dropped), SPARK_DEFAULT_CONF, KNOWS);
    expect(r.firstFailureMs).toBe(120 * S);
    expect(r.waveEndMs).toBe(600 * S);
    expect(r.giveUpMs).toBe(600 * S);
    expect(r.boundBy).toBe('serial-first-connects');
    expect(r.connectsBeforeGiveUp).toBe(5);
  });

  it('defaults, driver unaware: max(5 x 120 s, 495 s) = 600 s; 11 connects had failed by then', () => {
    // Peer i starts at 120 i s; its connects end at 120 i + {120, 245, 370, 495} s.
    // Ending at or before 600 s: peer 0: 4, peer 1: 3, peer 2: 2, peer 3: 1, peer 4: 1 -> 11.
    const r = taskGiveUp(uniformPeers(5, dropped), SPARK_DEFAULT_CONF, UNAWARE);
    expect(r.firstFailureMs).toBe(495 * S);
    expect(r.giveUpMs).toBe(600 * S);
    expect(r.failingPeer).toBe(0);
    expect(r.connectsBeforeGiveUp).toBe(11);
  });

  it('connectionCreationTimeout=10s, driver knows: 5 x 10 s = 50 s', () => {
    expect(taskGiveUp(uniformPeers(5, dropped), SPARK_TUNED_CONF, KNOWS).giveUpMs).toBe(50 * S);
  });

  it('connectionCreationTimeout=10s, driver unaware: max(50 s, 4 x 10 s + 3 x 5 s = 55 s) = 55 s', () => {
    const r = taskGiveUp(uniformPeers(5, dropped), SPARK_TUNED_CONF, UNAWARE);
    expect(r.waveEndMs).toBe(50 * S);
    expect(r.giveUpMs).toBe(55 * S);
    expect(r.boundBy).toBe('retry-chain');
  });

  it('spark.reducer.maxReqsInFlight=1: only peer 1 is in flight, so the task fails with it', () => {
    const conf = { ...SPARK_DEFAULT_CONF, maxReqsInFlight: 1 };
    expect(taskGiveUp(uniformPeers(5, dropped), conf, KNOWS).giveUpMs).toBe(120 * S);
    expect(taskGiveUp(uniformPeers(5, dropped), conf, UNAWARE).giveUpMs).toBe(495 * S);
  });
});

describe('five lost peers behind their Services (refused in 1 ms, driver ask 2 ms)', () => {
  const refused = { kind: 'refused', failMs: 1 } as const;

  it('driver knows: 5 x (1 ms + 2 ms) = 15 ms', () => {
    const r = taskGiveUp(uniformPeers(5, refused, 2), SPARK_DEFAULT_CONF, KNOWS);
    expect(r.giveUpMs).toBe(15);
    expect(r.failingPeerConnects).toBe(1);
  });

  it('driver unaware: only the retry waits remain, 4 x 3 ms + 3 x 5 s = 15.012 s', () => {
    const r = taskGiveUp(uniformPeers(5, refused, 2), SPARK_DEFAULT_CONF, UNAWARE);
    expect(r.giveUpMs).toBe(15_012);
    expect(r.failingPeerConnects).toBe(4);
  });

  it('the connect timeout does not matter when the network answers', () => {
    const a = taskGiveUp(uniformPeers(5, refused, 2), SPARK_DEFAULT_CONF, UNAWARE).giveUpMs;
    const b = taskGiveUp(uniformPeers(5, refused, 2), SPARK_TUNED_CONF, UNAWARE).giveUpMs;
    expect(a).toBe(b);
  });

  it('the driver learns at 7 s: asks at 1 ms and 5.002 s say alive, the one at 10.003 s says dead', () => {
    const r = taskGiveUp(uniformPeers(1, { kind: 'refused', failMs: 1 }), SPARK_DEFAULT_CONF, 7 * S);
    expect(r.giveUpMs).toBe(10_003);
    expect(r.failingPeerConnects).toBe(3);
    expect(r.chains[0]?.reason).toBe('executor-dead');
  });
});

describe('scaling and input checks', () => {
  it('x1/60 turns 120 s into 2 s and 5 s into 83.3 ms, and keeps maxRetries', () => {
    const c = scaleConf(SPARK_DEFAULT_CONF, 1 / 60);
    expect(c.connectTimeoutMs).toBeCloseTo(2000, 9);
    expect(c.retryWaitMs).toBeCloseTo(83.333, 3);
    expect(c.maxRetries).toBe(3);
  });

  it('a scaled run scales a timeout-bound give-up exactly', () => {
    const real = taskGiveUp(uniformPeers(5, dropped), SPARK_DEFAULT_CONF, UNAWARE).giveUpMs;
    const scaled = taskGiveUp(uniformPeers(5, dropped), scaleConf(SPARK_DEFAULT_CONF, 1 / 60), UNAWARE).giveUpMs;
    expect(scaled * 60).toBeCloseTo(real, 6);
  });

  it('a refusal slower than the timeout is cut by the timeout', () => {
    const r = taskGiveUp(uniformPeers(1, { kind: 'refused', failMs: 200 * S }), SPARK_DEFAULT_CONF, KNOWS);
    expect(r.giveUpMs).toBe(120 * S);
  });

  it('rejects settings Spark would not wait on', () => {
    expect(() => taskGiveUp(uniformPeers(1, dropped), { ...SPARK_DEFAULT_CONF, connectTimeoutMs: 0 }, KNOWS)).toThrow();
    expect(() => taskGiveUp(uniformPeers(1, dropped), { ...SPARK_DEFAULT_CONF, maxRetries: -1 }, KNOWS)).toThrow();
    expect(() => taskGiveUp([], SPARK_DEFAULT_CONF, KNOWS)).toThrow();
  });
});
