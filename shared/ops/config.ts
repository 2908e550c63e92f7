import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { commaList, intFromEnv } from './env-schemas.ts';
import { EDGE_ENV, type EdgeConfig, edgeConfig } from './edge-config.ts';

/** In-cluster, a pod's own namespace is in this file; it is the default watch scope. */
export const SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * The ApiServerSource adapter sends one event at a time per namespace and waits for the answer;
 * it retries 5 times (50 ms × 2^n: 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s) on 404/413/425/429/502/503/504
 * and network errors, then drops the event (knative/eventing pkg/adapter/apiserver). An event
 * that keeps failing therefore stalls its namespace for 6 × budget + 3.1 s: 1.5 s keeps that
 * under 15 s, after which the sweep repairs. The Broker overlays retry with their own delivery
 * spec and a dead-letter sink, and set a longer budget.
 */
export const DIRECT_SINK_DEADLINE_MS = 1_500;

const EnvSchema = z.object({
  WATCH_NAMESPACES: commaList(z.string().max(63).regex(DNS1123_LABEL, 'each namespace must be a DNS-1123 label')),
  OPT_IN_MODE: z.enum(['label', 'all']).default('label'),
  BLOCK_MANAGER_PORT: intFromEnv(1, 65535).optional(),
  COOLDOWN_SECONDS: intFromEnv(0, 7 * 24 * 3600).default(300),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  PORT: intFromEnv(1, 65535).default(8080),
  EVENT_DEADLINE_MS: intFromEnv(100, 600_000).default(DIRECT_SINK_DEADLINE_MS),
  REQUEST_TIMEOUT_MS: intFromEnv(50, 120_000).default(1_000),
  REPLY_MODE: z.enum(['event', 'none']).default('event'),
  SWEEP_DEADLINE_MS: intFromEnv(1_000, 600_000).default(20_000),
  MAX_BODY_BYTES: intFromEnv(1024, 64 * 1024 * 1024).default(1024 * 1024),
  SWEEP_PAGE_SIZE: intFromEnv(1, 5_000).default(500),
  MAX_SERVICES_PER_NAMESPACE: intFromEnv(1, 1_000_000).default(2_000),
  MAX_SERVICES_RECOUNT_MARGIN: intFromEnv(0, 1_000_000).default(200),
  MAX_SERVICES_PER_APPLICATION: intFromEnv(1, 1_000_000).optional(),
  // The HTTP edge (request bounds, sweep coalescing, sender authentication): shared/edge-config.ts.
  ...EDGE_ENV,
});

/** The environment variables the function reads (each one's default applies when unset). */
export const CONFIG_ENV_NAMES: ReadonlySet<string> = new Set(Object.keys(EnvSchema.shape));

export type LogLevel = z.infer<typeof EnvSchema>['LOG_LEVEL'];

export interface Config extends EdgeConfig {
  /** Namespaces the function may act in; it never touches anything elsewhere. */
  readonly namespaces: readonly string[];
  /** `label`: only executors (or their drivers) that carry the opt-in key; `all`: every Spark executor. */
  readonly optInMode: 'label' | 'all';
  readonly defaultBlockManagerPort: number | undefined;
  /** Seconds a Service outlives its executor; 0 = until the driver goes. */
  readonly cooldownSeconds: number;
  readonly logLevel: LogLevel;
  readonly port: number;
  /** Budget for one event including retries; past it the event is answered 5xx for redelivery. */
  readonly eventDeadlineMs: number;
  /** Timeout of one API request. */
  readonly requestTimeoutMs: number;
  /**
   * Budget of one sweep (a PingSource tick). Its sender does not hold pod events back while it
   * waits, so a sweep may take longer than a pod event; it stops at half of this and the next
   * tick goes on from there.
   */
  readonly sweepDeadlineMs: number;
  /**
   * `event`: answer with a CloudEvent saying what happened; `none`: answer 204 No Content. A
   * Broker republishes every reply as a new event, and a direct sink's reply is ignored.
   */
  readonly replyMode: 'event' | 'none';
  readonly maxBodyBytes: number;
  /** `limit` of every list call (the sweep, per-app and per-namespace lists), so each page stays bounded. */
  readonly sweepPageSize: number;
  /** Creates stop (skipped, with the reason) once the namespace holds this many Services of ours. */
  readonly maxServicesPerNamespace: number;
  /**
   * A create that would bring a remembered count (up to 60 s old, blind to other instances' creates)
   * within this many of the cap counts afresh first (issue 17, class 5).
   */
  readonly maxServicesRecountMargin: number;
  /**
   * Creates for one application (spark-app-selector) stop once it holds this many Services of
   * ours, so that one application cannot take the whole namespace (issue 17, class 3); default
   * half of maxServicesPerNamespace.
   */
  readonly maxServicesPerApplication: number;
  /** How old a remembered "this pod runs" may be to justify creating a Service (never anything that hurts). */
  readonly factTtlMs: number;
}

/** A scale-up's adds arrive within seconds; one read of its driver and of each batch of executors serves them all. */
export const FACT_TTL_MS = 10_000;

/** MAX_SERVICES_PER_APPLICATION when unset: half the namespace's cap (one application never fills it). */
export const defaultServicesPerApplication = (maxServicesPerNamespace: number): number =>
  Math.max(1, Math.floor(maxServicesPerNamespace / 2));

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Parses the environment; throws ConfigError with every problem listed, so start-up fails loudly. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  readNamespaceFile: () => string | undefined = readServiceAccountNamespace,
): Config {
  // An empty variable (common in manifests and templating) means "not set".
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value.trim() !== ''));
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  const e = parsed.data;
  const edge = edgeConfig(e);
  if (edge.problems.length > 0) throw new ConfigError(`invalid configuration:\n  ${edge.problems.join('\n  ')}`);
  let namespaces = e.WATCH_NAMESPACES;
  if (namespaces.length === 0) {
    const own = readNamespaceFile()?.trim();
    if (own === undefined || own === '' || !DNS1123_LABEL.test(own)) {
      throw new ConfigError(
        `invalid configuration:\n  WATCH_NAMESPACES: not set, and no namespace could be read from ${SERVICE_ACCOUNT_NAMESPACE_FILE}; set WATCH_NAMESPACES to a comma-separated list of namespaces`,
      );
    }
    namespaces = [own];
  }
  return {
    namespaces: [...new Set(namespaces)],
    optInMode: e.OPT_IN_MODE,
    defaultBlockManagerPort: e.BLOCK_MANAGER_PORT,
    cooldownSeconds: e.COOLDOWN_SECONDS,
    logLevel: e.LOG_LEVEL,
    port: e.PORT,
    eventDeadlineMs: e.EVENT_DEADLINE_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    replyMode: e.REPLY_MODE,
    sweepDeadlineMs: e.SWEEP_DEADLINE_MS,
    maxBodyBytes: e.MAX_BODY_BYTES,
    sweepPageSize: e.SWEEP_PAGE_SIZE,
    maxServicesPerNamespace: e.MAX_SERVICES_PER_NAMESPACE,
    maxServicesRecountMargin: e.MAX_SERVICES_RECOUNT_MARGIN,
    maxServicesPerApplication: e.MAX_SERVICES_PER_APPLICATION ?? defaultServicesPerApplication(e.MAX_SERVICES_PER_NAMESPACE),
    factTtlMs: FACT_TTL_MS,
    ...edge.config,
  };
}

function readServiceAccountNamespace(): string | undefined {
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE_FILE, 'utf8');
  } catch {
    return undefined;
  }
}
