/**
 * Configuration of the function's HTTP edge (issue 17): what one request may cost, how many
 * connections are held, how often a sweep may start, and who may send events. Parsed from the
 * environment with the rest of the configuration (shared/config.ts).
 */
import { z } from 'zod';
import { commaList, intFromEnv } from './env-schemas.ts';

/** `system:serviceaccount:<namespace>:<name>`, as a TokenReview reports a ServiceAccount's token. */
const SERVICE_ACCOUNT_USERNAME = /^system:serviceaccount:[a-z0-9]([-a-z0-9]*[a-z0-9])?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export const EDGE_ENV = {
  /** Headers and the whole body must have arrived within this; then 408 and the connection is closed. */
  REQUEST_RECEIVE_TIMEOUT_MS: intFromEnv(1_000, 600_000).default(10_000),
  /** Open connections held at once (probes and scrapes included); more are closed on accept. */
  MAX_CONNECTIONS: intFromEnv(4, 100_000).default(64),
  /** Nesting depth of JSON bodies (arrays and objects); deeper is refused with 400 before any parse. */
  MAX_JSON_DEPTH: intFromEnv(8, 10_000).default(64),
  /** A sweep starts at most once per this interval per process; ticks meanwhile are answered 2xx and counted. */
  SWEEP_MIN_INTERVAL_MS: intFromEnv(0, 3_600_000).default(30_000),
  /** `tokenreview`: only events with a bearer token the API server vouches for, for our audience, from SENDER_AUTH_USERS. */
  SENDER_AUTH: z.enum(['off', 'tokenreview']).default('off'),
  SENDER_AUTH_AUDIENCE: z.string().trim().min(1).max(253).optional(),
  SENDER_AUTH_USERS: commaList(
    z.string().max(330).regex(SERVICE_ACCOUNT_USERNAME, 'each entry must be system:serviceaccount:<namespace>:<name>'),
  ),
  /** How long a TokenReview's answer is reused for the same token (0: every request asks). */
  SENDER_AUTH_CACHE_SECONDS: intFromEnv(0, 600).default(30),
};

const EdgeSchema = z.object(EDGE_ENV);

export interface SenderAuthConfig {
  readonly audience: string;
  /** Usernames (as TokenReview reports them) whose events are accepted. */
  readonly users: readonly string[];
  readonly cacheMs: number;
}

export interface EdgeConfig {
  readonly requestReceiveTimeoutMs: number;
  readonly maxConnections: number;
  readonly maxJsonDepth: number;
  readonly sweepMinIntervalMs: number;
  /** undefined: any sender is accepted (the default; start-up warns). */
  readonly senderAuth: SenderAuthConfig | undefined;
}

/** The edge part of the parsed environment; problems are returned, for config.ts to list with the rest. */
export function edgeConfig(e: z.infer<typeof EdgeSchema>): { config: EdgeConfig; problems: string[] } {
  const problems: string[] = [];
  let senderAuth: SenderAuthConfig | undefined;
  if (e.SENDER_AUTH === 'tokenreview') {
    if (e.SENDER_AUTH_AUDIENCE === undefined)
      problems.push(
        'SENDER_AUTH_AUDIENCE: required when SENDER_AUTH=tokenreview (the audience the sources request tokens for: their spec.sink.audience)',
      );
    if (e.SENDER_AUTH_USERS.length === 0)
      problems.push(
        "SENDER_AUTH_USERS: required when SENDER_AUTH=tokenreview (the sources' OIDC ServiceAccounts, as system:serviceaccount:<namespace>:<name>)",
      );
    senderAuth = {
      audience: e.SENDER_AUTH_AUDIENCE ?? '',
      users: [...new Set(e.SENDER_AUTH_USERS)],
      cacheMs: e.SENDER_AUTH_CACHE_SECONDS * 1000,
    };
  }
  return {
    config: {
      requestReceiveTimeoutMs: e.REQUEST_RECEIVE_TIMEOUT_MS,
      maxConnections: e.MAX_CONNECTIONS,
      maxJsonDepth: e.MAX_JSON_DEPTH,
      sweepMinIntervalMs: e.SWEEP_MIN_INTERVAL_MS,
      senderAuth,
    },
    problems,
  };
}
