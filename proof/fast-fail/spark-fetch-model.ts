/**
 * A model of how long a Spark reduce task takes to give up on shuffle blocks held by lost
 * executors, built from Spark's fetch path. It is pure (no I/O, no clock), so it can be unit-tested
 * and applied to connect times measured at any scale.
 *
 * The rules, read in apache/spark v3.5.0 (NettyBlockTransferService and ShuffleBlockFetcherIterator
 * are the same in v4.1.1). Line numbers are for v3.5.0. proof/fast-fail/README.md has the full list.
 *
 *  1. A connect waits at most the connect timeout. TransportClientFactory.createClient(address)
 *     blocks in `cf.await(connCreateTimeout)` (l. 289). connCreateTimeout is
 *     TransportConf.connectionCreationTimeoutMs() (l. 110): spark.shuffle.io.connectionCreationTimeout,
 *     else spark.shuffle.io.connectionTimeout, else spark.network.timeout = 120 s (l. 101).
 *     A timeout and a refused connect both throw an IOException (l. 290-294).
 *  2. Every failed connect asks the driver. NettyBlockTransferService.fetchBlocks' starter
 *     (l. 131-144) catches the IOException and asks `IsExecutorAlive(execId)`. The driver's
 *     BlockManagerMasterEndpoint answers `blockManagerIdByExecutor.contains(execId)`. If the answer
 *     is false, it throws ExecutorDeadException. That is a SparkException with no cause, not an
 *     IOException, so it is not retried (SPARK-27637, apache/spark#24533 and #25469).
 *     Otherwise the IOException is rethrown.
 *  3. IOExceptions are retried. RetryingBlockTransferor.shouldRetry (l. 215-229) retries an
 *     IOException (or one caused by an IOException) while retryCount < maxRetries
 *     (spark.shuffle.io.maxRetries, default 3). initiateRetry (l. 193-207) sleeps retryWait
 *     (spark.shuffle.io.retryWait, default 5 s) on a shared "Block Transfer Retry" thread pool, then
 *     tries again. So the retries of one peer run in the background, not on the task thread.
 *  4. The first attempt at each peer runs on the task thread, one peer after another.
 *     ShuffleBlockFetcherIterator is built with `initialize()` (l. 194). That shuffles the remote
 *     requests (l. 709) and calls fetchUpToMaxBytes (l. 715), whose loop (l. 1186) calls
 *     sendRequest -> shuffleClient.fetchBlocks (l. 370/373) -> RetryingBlockTransferor.start() ->
 *     createAndStart -> createClient for each request in turn. That is synchronous: the task thread
 *     blocks in connect #1 to peer 1, then connect #1 to peer 2, and so on. The loop continues while
 *     requests fit in spark.reducer.maxSizeInFlight (48m) and spark.reducer.maxReqsInFlight
 *     (Int.MaxValue). This is the exact meaning of "one at a time" here. (v4.1.1 even counts this
 *     first wave as fetch wait time: `withFetchWaitTimeTracked(fetchUpToMaxBytes())`.)
 *  5. The task gives up at the first final failure. A failed block goes on the `results` queue as a
 *     FailureFetchResult (l. 359). After initialize(), next() takes results in order (l. 809) and
 *     the first FailureFetchResult throws FetchFailedException (l. 964-971).
 *
 * Hence, for K lost peers whose requests all go out in the first wave:
 *
 *   give-up = max( sum over peers of the first attempt (connect + driver check),   [task thread, rule 4]
 *                  min over peers of when that peer's fetch finally fails )        [rules 2, 3, 5]
 *
 * The time is NOT the sum of K full retry chains, because the retries run in the background. It
 * is not one chain either, because the task thread walks all K first connects before it looks at
 * the results queue.
 *
 * Out of scope:
 *  - live peers' requests in the same wave (their connects are fast);
 *  - several requests to one lost peer (TransportClientFactory's fast-fail window, 95 % of
 *    retryWait, l. 119 and 207, would fail the later ones at once);
 *  - what the DAGScheduler does after the FetchFailedException (stage retry).
 */

/** Spark's defaults (TransportConf, v3.5.0 and the 4.x line). */
export const SPARK_DEFAULT_CONF: FetchConf = {
  connectTimeoutMs: 120_000, // spark.network.timeout, the fallback of spark.shuffle.io.connectionCreationTimeout
  maxRetries: 3, // spark.shuffle.io.maxRetries
  retryWaitMs: 5_000, // spark.shuffle.io.retryWait
};

/** The setting users lower instead: spark.shuffle.io.connectionCreationTimeout=10s. */
export const SPARK_TUNED_CONF: FetchConf = { ...SPARK_DEFAULT_CONF, connectTimeoutMs: 10_000 };

export interface FetchConf {
  /** Connect timeout: spark.shuffle.io.connectionCreationTimeout (defaults to 120 s). */
  connectTimeoutMs: number;
  /** spark.shuffle.io.maxRetries. */
  maxRetries: number;
  /** spark.shuffle.io.retryWait. */
  retryWaitMs: number;
  /**
   * spark.reducer.maxReqsInFlight (default Int.MaxValue). The first wave always sends at least
   * one request. It is assumed that all K requests fit in spark.reducer.maxSizeInFlight.
   */
  maxReqsInFlight?: number;
}

/** How a connect to a lost peer ends. Both kinds are IOExceptions in Spark, so both are retried. */
export type ConnectOutcome =
  /** Packets silently dropped (a vanished pod IP): the connect waits for the connect timeout. */
  | { kind: 'dropped' }
  /** Answered by the network (REJECT / RST: ECONNREFUSED) after failMs, whatever the timeout. */
  | { kind: 'refused'; failMs: number };

export interface LostPeer {
  outcome: ConnectOutcome;
  /** Round trip of the IsExecutorAlive ask that follows each failed connect (default 0). */
  driverRpcMs?: number;
}

/**
 * When the driver knows the executor is dead, on the task's clock (0 = the first connect starts).
 * 0 means it already knows. Infinity means it does not learn during the fetch. The ask is answered
 * "dead" when it is sent at or after this time.
 */
export type DriverKnowsAtMs = number;

export interface AttemptTiming {
  peer: number;
  /** 1 = the first attempt (task thread), 2.. = retries (background). */
  attempt: number;
  startMs: number;
  /** When the connect failed. */
  connectEndMs: number;
  /** When the driver's answer arrived (connectEndMs + driverRpcMs). */
  endMs: number;
  driverSaysDead: boolean;
}

export interface PeerChain {
  peer: number;
  attempts: AttemptTiming[];
  /** When this peer's FailureFetchResult lands in the results queue. */
  failedAtMs: number;
  /** ExecutorDeadException (driver check) or the last IOException (retries used up). */
  reason: 'executor-dead' | 'retries-exhausted';
}

export interface TaskGiveUp {
  /** When the task throws FetchFailedException. */
  giveUpMs: number;
  /** When the task thread has sent the first wave (sum of the first attempts). */
  waveEndMs: number;
  /** The earliest failedAtMs among peers of the first wave. */
  firstFailureMs: number;
  /** The peer whose failure is thrown. */
  failingPeer: number;
  /** What the give-up time waited for. */
  boundBy: 'serial-first-connects' | 'retry-chain';
  /** Connect attempts of the failing peer (1 with the driver check, maxRetries + 1 without). */
  failingPeerConnects: number;
  /** Connect attempts over all peers that had failed by giveUpMs (ties count). */
  connectsBeforeGiveUp: number;
  chains: PeerChain[];
}

function connectFailMs(outcome: ConnectOutcome, conf: FetchConf): number {
  // A refusal that came later than the timeout would still be cut by the timeout.
  return outcome.kind === 'dropped' ? conf.connectTimeoutMs : Math.min(outcome.failMs, conf.connectTimeoutMs);
}

function checkConf(conf: FetchConf): void {
  if (!(conf.connectTimeoutMs > 0)) throw new Error('connectTimeoutMs must be > 0 (Spark: <= 0 waits without bound)');
  if (!Number.isInteger(conf.maxRetries) || conf.maxRetries < 0) throw new Error('maxRetries must be an integer >= 0');
  if (!(conf.retryWaitMs >= 0)) throw new Error('retryWaitMs must be >= 0');
}

/**
 * The fetch of one lost peer. Attempt 1 starts at startMs. Each failed connect asks the driver.
 * "dead" ends the chain at once. Otherwise a retry follows retryWait later, until maxRetries
 * retries are used.
 */
export function peerChain(peer: number, startMs: number, lost: LostPeer, conf: FetchConf, driverKnowsAtMs: DriverKnowsAtMs): PeerChain {
  checkConf(conf);
  const c = connectFailMs(lost.outcome, conf);
  const r = lost.driverRpcMs ?? 0;
  const attempts: AttemptTiming[] = [];
  let t = startMs;
  for (let attempt = 1; ; attempt++) {
    const connectEndMs = t + c;
    const driverSaysDead = connectEndMs >= driverKnowsAtMs;
    const endMs = connectEndMs + r;
    attempts.push({ peer, attempt, startMs: t, connectEndMs, endMs, driverSaysDead });
    if (driverSaysDead) return { peer, attempts, failedAtMs: endMs, reason: 'executor-dead' };
    if (attempt > conf.maxRetries) return { peer, attempts, failedAtMs: endMs, reason: 'retries-exhausted' };
    t = endMs + conf.retryWaitMs;
  }
}

/**
 * A reduce task that must fetch from K lost peers, sent in the given order. Returns when it throws
 * FetchFailedException, and why.
 */
export function taskGiveUp(peers: readonly LostPeer[], conf: FetchConf, driverKnowsAtMs: DriverKnowsAtMs): TaskGiveUp {
  checkConf(conf);
  if (peers.length === 0) throw new Error('need at least one lost peer');
  const wave = Math.min(peers.length, Math.max(1, Math.floor(conf.maxReqsInFlight ?? Number.POSITIVE_INFINITY)));
  const chains: PeerChain[] = [];
  let t = 0;
  for (let i = 0; i < wave; i++) {
    const chain = peerChain(i, t, peers[i] as LostPeer, conf, driverKnowsAtMs);
    chains.push(chain);
    // The task thread is busy for the first attempt only: connect + driver check.
    t = (chain.attempts[0] as AttemptTiming).endMs;
  }
  const waveEndMs = t;
  let failing = chains[0] as PeerChain;
  for (const ch of chains) if (ch.failedAtMs < failing.failedAtMs) failing = ch;
  const firstFailureMs = failing.failedAtMs;
  const giveUpMs = Math.max(waveEndMs, firstFailureMs);
  let connectsBeforeGiveUp = 0;
  for (const ch of chains) for (const a of ch.attempts) if (a.connectEndMs <= giveUpMs) connectsBeforeGiveUp++;
  return {
    giveUpMs,
    waveEndMs,
    firstFailureMs,
    failingPeer: failing.peer,
    boundBy: firstFailureMs > waveEndMs ? 'retry-chain' : 'serial-first-connects',
    failingPeerConnects: failing.attempts.length,
    connectsBeforeGiveUp,
    chains,
  };
}

/** K identical lost peers. */
export function uniformPeers(k: number, outcome: ConnectOutcome, driverRpcMs = 0): LostPeer[] {
  return Array.from({ length: k }, () => ({ outcome, driverRpcMs }));
}

/** Scale a conf's times by factor (e.g. 1/60: 120 s -> 2 s); retry counts are unchanged. */
export function scaleConf(conf: FetchConf, factor: number): FetchConf {
  return {
    ...conf,
    connectTimeoutMs: conf.connectTimeoutMs * factor,
    retryWaitMs: conf.retryWaitMs * factor,
  };
}
