/**
 * Only the adapter may speak (issue 17): with Knative's event-delivery authentication
 * (`authentication-oidc`), every source sends `Authorization: Bearer <token>`, a projected
 * ServiceAccount token of the source's own OIDC ServiceAccount (knative/eventing
 * pkg/auth/serviceaccount.go: GetOIDCServiceAccountNameForResource; the name is in the source's
 * status.auth.serviceAccountName) for the sink's audience (spec.sink.audience, or the
 * addressable's status.address.audience; pkg/auth/audience.go: <group>/<kind>/<namespace>/<name>).
 *
 * The function asks the API server whether the token is valid for its audience (TokenReview,
 * authentication.k8s.io/v1, with `audiences`), and accepts the event only from the users it is
 * configured to trust. All of it happens on the headers, before the body is read.
 *
 * Cost bounds: a token that does not even claim our audience, a trusted subject and a future
 * expiry (its unverified claims) is refused without asking; concurrent reviews are bounded and
 * one review serves every request with the same token at once; answers are remembered by the
 * token's SHA-256 (never the token), with the time they were given, for at most the configured
 * time and never past the token's expiry.
 */
import { createHash } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { Counter, type Registry } from 'prom-client';
import { z } from 'zod';
import { BoundedLru } from '../../shared/ops/bounded-lru.ts';
import type { SenderAuthConfig } from '../../shared/ops/edge-config.ts';
import { METRIC_PREFIX } from '../../shared/ops/metrics.ts';

/** What the API server said about a token (TokenReview status), and when. */
export interface TokenReviewFact {
  readonly authenticated: boolean;
  readonly username: string | undefined;
  readonly audiences: readonly string[];
  readonly error: string | undefined;
  /** Epoch ms of the review. */
  readonly reviewedAt: number;
}

export interface TokenReviewer {
  /** Throws when the API server could not answer (the event is then answered 503). */
  review(token: string, audiences: readonly string[]): Promise<Omit<TokenReviewFact, 'reviewedAt'>>;
}

export type SenderVerdict =
  | { readonly ok: true; readonly username: string }
  | {
      readonly ok: false;
      readonly status: 401 | 403 | 503;
      readonly reason: 'unauthenticated' | 'forbidden' | 'auth-unavailable';
      readonly message: string;
    };

const TokenReviewStatus = z.object({
  authenticated: z.boolean().optional(),
  user: z.object({ username: z.string().max(1024).optional() }).optional(),
  audiences: z.array(z.string().max(1024)).max(64).optional(),
  error: z.string().optional(),
});

/** TokenReview through @kubernetes/client-node, bounded by a timeout. */
export class KubeTokenReviewer implements TokenReviewer {
  private readonly api: k8s.AuthenticationV1Api;
  private readonly timeoutMs: number;
  constructor(kubeConfig: k8s.KubeConfig, timeoutMs: number) {
    this.api = kubeConfig.makeApiClient(k8s.AuthenticationV1Api);
    this.timeoutMs = timeoutMs;
  }

  async review(token: string, audiences: readonly string[]): Promise<Omit<TokenReviewFact, 'reviewedAt'>> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`TokenReview not answered within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    try {
      const answer = await Promise.race([
        this.api.createTokenReview({
          body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: [...audiences] } },
        }),
        timeout,
      ]);
      const status = TokenReviewStatus.safeParse(answer.status ?? {});
      if (!status.success) throw new Error('TokenReview answer has an unexpected status');
      return {
        authenticated: status.data.authenticated === true,
        username: status.data.user?.username,
        audiences: status.data.audiences ?? [],
        error: status.data.error,
      };
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      throw new Error(
        `TokenReview failed${typeof code === 'number' ? ` (HTTP ${code})` : ''}: ${error instanceof Error ? error.message.slice(0, 300) : String(error)}`,
      );
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A JWT's unverified claims: only to refuse without asking what could never pass. */
const UnverifiedClaims = z.object({
  sub: z.string().optional(),
  aud: z.union([z.string(), z.array(z.string())]).optional(),
  exp: z.number().optional(),
});

const MAX_TOKEN_LENGTH = 8 * 1024;
/** TokenReviews in flight at once; more senders with unknown tokens get 503 (retried) instead of queueing on the API server. */
const MAX_CONCURRENT_REVIEWS = 8;
const CACHE_ENTRIES = 1_024;

export class SenderAuthenticator {
  private readonly cache = new BoundedLru<TokenReviewFact>(CACHE_ENTRIES);
  private readonly inFlight = new Map<string, Promise<TokenReviewFact>>();
  private readonly trusted: ReadonlySet<string>;
  private readonly decisions: Counter<'result'>;
  /** TokenReviews sent (tests and the report read it). */
  reviews = 0;

  private readonly config: SenderAuthConfig;
  private readonly reviewer: TokenReviewer;
  private readonly now: () => number;

  constructor(config: SenderAuthConfig, reviewer: TokenReviewer, registry: Registry, now: () => number = Date.now) {
    this.config = config;
    this.reviewer = reviewer;
    this.now = now;
    this.trusted = new Set(config.users);
    const name = `${METRIC_PREFIX}sender_auth_total`;
    this.decisions =
      (registry.getSingleMetric(name) as Counter<'result'> | undefined) ??
      new Counter({
        name,
        help: 'Sender authentication decisions on POST / (SENDER_AUTH=tokenreview), by result: accepted, unauthenticated (401), forbidden (403: a valid token of an identity not trusted), unavailable (503: the TokenReview failed).',
        labelNames: ['result'],
        registers: [registry],
      });
  }

  async check(authorization: string | string[] | undefined): Promise<SenderVerdict> {
    const verdict = await this.decide(authorization);
    this.decisions.inc({ result: verdict.ok ? 'accepted' : verdict.reason === 'auth-unavailable' ? 'unavailable' : verdict.reason });
    return verdict;
  }

  private async decide(authorization: string | string[] | undefined): Promise<SenderVerdict> {
    const header = typeof authorization === 'string' ? authorization : undefined;
    const match = header === undefined ? null : /^Bearer ([A-Za-z0-9._~+/=-]+)$/i.exec(header.trim());
    if (match === null || match[1]!.length > MAX_TOKEN_LENGTH)
      return unauthenticated('a bearer token is required (Knative event-delivery authentication)');
    const token = match[1]!;
    const claims = unverifiedClaims(token);
    if (claims === undefined) return unauthenticated('the bearer token is not a JWT');
    const audiences = typeof claims.aud === 'string' ? [claims.aud] : (claims.aud ?? []);
    if (!audiences.includes(this.config.audience))
      return unauthenticated(`the token is not for this function's audience ${this.config.audience}`);
    const nowMs = this.now();
    if (claims.exp === undefined || claims.exp * 1000 <= nowMs) return unauthenticated('the token has expired');
    if (claims.sub === undefined || !this.trusted.has(claims.sub)) return forbidden(claims.sub);

    const key = createHash('sha256').update(token).digest('base64url');
    let fact = this.cache.get(key);
    // Never past the token's own expiry, nor the configured time since the API server said so.
    const fresh = (f: TokenReviewFact): boolean => nowMs - f.reviewedAt < this.config.cacheMs && nowMs < claims.exp! * 1000;
    if (fact === undefined || !fresh(fact)) {
      let pending = this.inFlight.get(key);
      if (pending === undefined) {
        if (this.inFlight.size >= MAX_CONCURRENT_REVIEWS) {
          return {
            ok: false,
            status: 503,
            reason: 'auth-unavailable',
            message: `${MAX_CONCURRENT_REVIEWS} token reviews are in flight: retry`,
          };
        }
        this.reviews++;
        pending = this.reviewer.review(token, [this.config.audience]).then((r) => ({ ...r, reviewedAt: this.now() }));
        this.inFlight.set(key, pending);
        void pending.then(
          (f) => {
            this.inFlight.delete(key);
            if (this.config.cacheMs > 0) this.cache.set(key, f);
          },
          () => this.inFlight.delete(key),
        );
      }
      try {
        fact = await pending;
      } catch (error) {
        return { ok: false, status: 503, reason: 'auth-unavailable', message: error instanceof Error ? error.message : String(error) };
      }
    }
    if (!fact.authenticated)
      return unauthenticated(
        `the API server did not authenticate the token${fact.error === undefined ? '' : `: ${fact.error.slice(0, 200)}`}`,
      );
    if (!fact.audiences.includes(this.config.audience))
      return unauthenticated(`the API server did not confirm the audience ${this.config.audience}`);
    if (fact.username === undefined || !this.trusted.has(fact.username)) return forbidden(fact.username);
    return { ok: true, username: fact.username };
  }
}

function unverifiedClaims(token: string): z.infer<typeof UnverifiedClaims> | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  try {
    const parsed = UnverifiedClaims.safeParse(JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function unauthenticated(message: string): SenderVerdict {
  return { ok: false, status: 401, reason: 'unauthenticated', message };
}

function forbidden(username: string | undefined): SenderVerdict {
  return {
    ok: false,
    status: 403,
    reason: 'forbidden',
    message: `${JSON.stringify((username ?? '(none)').slice(0, 330))} is not a trusted sender (SENDER_AUTH_USERS)`,
  };
}
