/**
 * The Spark rows of the fast-fail demo: three set-ups x (driver knows the executor is dead / does
 * not), each run for real with scaled-down settings (client.ts runSparkScenario). Each row is
 * checked against spark-fetch-model.ts at the same scaled settings and then projected with the
 * model to the real settings.
 */
import { REPORT_COLUMNS, fitTable, keepUnits, paragraph } from '../../testkit/text-layout.ts';
import { SPARK_DEFAULT_CONF, SPARK_TUNED_CONF, scaleConf, taskGiveUp, uniformPeers } from './spark-fetch-model.ts';
import type { ConnectOutcome, FetchConf, TaskGiveUp } from './spark-fetch-model.ts';
import type { SparkScenarioPlan, SparkScenarioResult, TargetPlan } from './types.ts';

export type SetupId = 'defaults-drop' | 'tuned-drop' | 'service-reject';

export const SETUPS: Record<SetupId, { title: string; standsFor: string; conf: FetchConf; target: 'drop' | 'reject' }> = {
  'defaults-drop': {
    title: 'Spark defaults, pod IP (DROP)',
    standsFor: 'peers connect to the vanished pod IP; connect timeout 120 s (spark.network.timeout), 3 retries, retryWait 5 s',
    conf: SPARK_DEFAULT_CONF,
    target: 'drop',
  },
  'tuned-drop': {
    title: 'connectionCreationTimeout=10s, pod IP (DROP)',
    standsFor: 'what users tune instead: spark.shuffle.io.connectionCreationTimeout=10s, the rest as default',
    conf: SPARK_TUNED_CONF,
    target: 'drop',
  },
  'service-reject': {
    title: 'Spark defaults, executor Service (REJECT)',
    standsFor: "this project: peers connect to the executor's Service, which has no endpoints and is rejected at once",
    conf: SPARK_DEFAULT_CONF,
    target: 'reject',
  },
};

export const SETUP_ORDER: SetupId[] = ['defaults-drop', 'tuned-drop', 'service-reject'];

export function scenarioId(setup: SetupId, driverKnows: boolean): string {
  return `${setup}/${driverKnows ? 'driver-knows' : 'driver-unaware'}`;
}

/** Scenarios for the client: every set-up x driver knows / not, at scale factor (e.g. 1/60). */
export function buildScenarios(factor: number, targets: { drop: TargetPlan[] | null; reject: TargetPlan[] | null }): SparkScenarioPlan[] {
  const out: SparkScenarioPlan[] = [];
  for (const setup of SETUP_ORDER) {
    const t = targets[SETUPS[setup].target];
    if (t === null) continue;
    const conf = scaleConf(SETUPS[setup].conf, factor);
    for (const driverKnows of [true, false]) {
      out.push({
        id: scenarioId(setup, driverKnows),
        targets: t,
        connectTimeoutMs: round3(conf.connectTimeoutMs),
        retryWaitMs: round3(conf.retryWaitMs),
        maxRetries: conf.maxRetries,
        driverKnows,
      });
    }
  }
  return out;
}

export interface SparkRow {
  id: string;
  setup: SetupId;
  title: string;
  driverKnows: boolean;
  peers: number;
  /** The settings the run used (scaled) and the ones the projection uses (real). */
  scaledConf: FetchConf;
  realConf: FetchConf;
  /** null when the set-up could not be run in this mode. */
  skipped?: string;
  measured: {
    giveUpMs: number;
    waveEndMs: number;
    failingReason: SparkScenarioResult['failingReason'];
    /** Connect attempts of the peer whose failure the task threw: 1 (driver check) or maxRetries + 1. */
    failingPeerConnects: number;
    /**
     * Connects over all peers that had failed by the give-up. Not shown in the table: with refused
     * connects the peers' chains are only a connect apart, so this count flips on timing noise.
     */
    connectsBeforeGiveUp: number;
    /** Mean time a connect took to fail, and how. */
    connectMs: number;
    connectCodes: Record<string, number>;
    /** Mean IsExecutorAlive round trip. */
    driverRpcMs: number;
  } | null;
  /** The model at the scaled settings, fed with the measured connect and ask times. */
  modelScaled: TaskGiveUp | null;
  /** (measured - model) / model. */
  deviation: number | null;
  /** The model at the real settings: dropped connects wait the real timeout, refusals keep their measured time. */
  projected: TaskGiveUp | null;
}

/** How the measured connects of a scenario failed, as the model's input. */
export function measuredOutcome(result: SparkScenarioResult): {
  outcome: ConnectOutcome;
  connectMs: number;
  codes: Record<string, number>;
} {
  const failed = result.attempts.filter((a) => a.outcome === 'timeout' || a.outcome === 'refused' || a.outcome === 'error');
  const codes: Record<string, number> = {};
  for (const a of result.attempts) if (a.outcome !== 'aborted') codes[a.code] = (codes[a.code] ?? 0) + 1;
  // The mean, not the median: the serial first connects add up, so their sum is what must match.
  const connectMs = mean(failed.map((a) => a.connectMs));
  const allTimedOut = failed.length > 0 && failed.every((a) => a.outcome === 'timeout');
  return { outcome: allTimedOut ? { kind: 'dropped' } : { kind: 'refused', failMs: connectMs }, connectMs, codes };
}

export function buildSparkRow(
  setup: SetupId,
  driverKnows: boolean,
  peers: number,
  factor: number,
  result: SparkScenarioResult | undefined,
  skipped?: string,
): SparkRow {
  const realConf = SETUPS[setup].conf;
  const scaledConf = scaleConf(realConf, factor);
  const base = { id: scenarioId(setup, driverKnows), setup, title: SETUPS[setup].title, driverKnows, peers, scaledConf, realConf };
  if (result === undefined) {
    return { ...base, skipped: skipped ?? 'not run', measured: null, modelScaled: null, deviation: null, projected: null };
  }
  const { outcome, connectMs, codes } = measuredOutcome(result);
  const rpcs = result.attempts.flatMap((a) => (a.rpcMs === null ? [] : [a.rpcMs]));
  const driverRpcMs = mean(rpcs);
  const knowsAt = driverKnows ? 0 : Number.POSITIVE_INFINITY;
  const done = result.attempts.filter((a) => a.outcome !== 'aborted');
  const measured = {
    giveUpMs: round3(result.giveUpMs),
    waveEndMs: round3(result.waveEndMs),
    failingReason: result.failingReason,
    failingPeerConnects: done.filter((a) => a.peer === result.failingPeer).length,
    connectsBeforeGiveUp: done.filter((a) => a.connectEndMs <= result.giveUpMs).length,
    connectMs: round3(connectMs),
    connectCodes: codes,
    driverRpcMs: round3(driverRpcMs),
  };
  const modelScaled = taskGiveUp(uniformPeers(peers, outcome, driverRpcMs), scaledConf, knowsAt);
  const projected = taskGiveUp(uniformPeers(peers, outcome, driverRpcMs), realConf, knowsAt);
  const deviation = modelScaled.giveUpMs > 0 ? (measured.giveUpMs - modelScaled.giveUpMs) / modelScaled.giveUpMs : null;
  return { ...base, measured, modelScaled, deviation, projected };
}

function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}

function round3(v: number): number {
  return Math.round(v * 1000) / 1000;
}

export function formatDuration(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms.toFixed(1)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(2)} s`;
  return `${(ms / 1000).toFixed(0)} s (${(ms / 60_000).toFixed(1)} min)`;
}

function why(row: SparkRow): string {
  const m = row.measured;
  const p = row.projected;
  if (m === null || p === null) return '-';
  const exc =
    m.failingReason === 'executor-dead' ? 'ExecutorDeadException (driver check)' : `IOException, ${row.realConf.maxRetries} retries used`;
  const bound =
    p.boundBy === 'serial-first-connects' ? `waited for ${row.peers} serial first connects` : 'waited for the first retry chain';
  return `${exc}; ${bound}`;
}

/** The table of the Spark rows, at most `width` columns wide (cells wrap); why each task gave up is in renderSparkWhy. */
export function renderSparkTable(rows: SparkRow[], width: number = REPORT_COLUMNS): string {
  const header = [
    'set-up',
    'driver knows executor is dead',
    'measured (scaled)',
    'model (scaled)',
    'projected @ real settings',
    'connects per lost peer (model)',
  ];
  const body = rows.map((r) => {
    if (r.skipped !== undefined || r.measured === null) {
      return [r.title, r.driverKnows ? 'yes' : 'no', `skipped: ${r.skipped ?? 'not run'}`, '-', '-', '-'];
    }
    const dev = r.deviation === null ? '' : ` (${r.deviation >= 0 ? '+' : ''}${(r.deviation * 100).toFixed(1)} %)`;
    return [
      r.title,
      r.driverKnows ? 'yes' : 'no',
      keepUnits(formatDuration(r.measured.giveUpMs)),
      keepUnits(`${formatDuration(r.modelScaled?.giveUpMs ?? null)}${dev}`),
      keepUnits(formatDuration(r.projected?.giveUpMs ?? null)),
      `${r.measured.failingPeerConnects} (${r.modelScaled?.failingPeerConnects ?? '-'})`,
    ];
  });
  return fitTable(header, body, width);
}

/** Why the task gave up, one wrapped item per row that ran. */
export function renderSparkWhy(rows: SparkRow[], width: number = REPORT_COLUMNS): string[] {
  return rows
    .filter((r) => r.measured !== null && r.skipped === undefined)
    .flatMap((r) => paragraph('  - ', `${r.title}, driver ${r.driverKnows ? 'knows' : 'does not know'}: ${why(r)}`, width));
}
