/**
 * ServiceAccount tokens and the TokenReview API (authentication.k8s.io/v1), enough for a function
 * to verify a sender's bearer token against "the API server":
 *
 *   POST /apis/authentication.k8s.io/v1/tokenreviews   {spec: {token, audiences?}}
 *
 * Tokens are minted by tests (`emu.tokens.mint(...)`), JWT-shaped like a projected
 * ServiceAccount token (claims iss, sub, aud, exp, iat, nbf, kubernetes.io), signed with an
 * HMAC key of this emulator (a real issuer signs with RS256/ES256: only the API server checks
 * either). The review follows the real authenticator (k8s.io/apiserver
 * pkg/authentication/token/ ... and plugin/pkg/auth/authenticator/token/...): a bad signature,
 * an expired token or a deleted ServiceAccount → authenticated false with an error; the token's
 * audiences must intersect spec.audiences (or, when none are given, the API server's own
 * audience) and status.audiences is that intersection; user is
 * system:serviceaccount:<ns>:<name> with the groups a ServiceAccount gets.
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';

export const TOKEN_REVIEW_PATH = '/apis/authentication.k8s.io/v1/tokenreviews';
/** The API server's own audience (kube-apiserver --api-audiences defaults to the issuer). */
export const API_SERVER_AUDIENCE = 'https://kubernetes.default.svc.cluster.local';
const ISSUER = 'https://kubernetes.default.svc.cluster.local';

export interface MintOptions {
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly audiences: readonly string[];
  /** Seconds from now; negative mints an already expired token. Default 3600. */
  readonly expiresInSeconds?: number;
}

interface Claims {
  iss: string;
  sub: string;
  aud: string[];
  exp: number;
  iat: number;
  nbf: number;
  'kubernetes.io': { namespace: string; serviceaccount: { name: string; uid: string } };
}

const b64url = (data: Buffer | string): string => Buffer.from(data).toString('base64url');

export class TokenIssuer {
  private readonly key = randomBytes(32);
  /** ServiceAccount uid by `<ns>/<name>`; a token of a deleted (or recreated) account is refused. */
  private readonly accounts = new Map<string, string>();
  /** Every review answered, in order: what tests assert the function's caching with. */
  readonly reviews: Array<{ token: string; audiences: readonly string[]; authenticated: boolean }> = [];
  now: () => number = Date.now;

  mint(options: MintOptions): string {
    const key = `${options.namespace}/${options.serviceAccount}`;
    let uid = this.accounts.get(key);
    if (uid === undefined) {
      uid = randomUUID();
      this.accounts.set(key, uid);
    }
    const iat = Math.floor(this.now() / 1000);
    const claims: Claims = {
      iss: ISSUER,
      sub: `system:serviceaccount:${options.namespace}:${options.serviceAccount}`,
      aud: [...options.audiences],
      exp: iat + (options.expiresInSeconds ?? 3600),
      iat,
      nbf: iat,
      'kubernetes.io': { namespace: options.namespace, serviceaccount: { name: options.serviceAccount, uid } },
    };
    const signingInput = `${b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }))}.${b64url(JSON.stringify(claims))}`;
    return `${signingInput}.${this.sign(signingInput)}`;
  }

  /** The ServiceAccount is deleted: its tokens stop authenticating (a new one with that name gets a new uid). */
  deleteServiceAccount(namespace: string, name: string): void {
    this.accounts.delete(`${namespace}/${name}`);
  }

  /** A TokenReview's status for the token and requested audiences. */
  review(token: string, requested: readonly string[]): Record<string, unknown> {
    const status = this.evaluate(token, requested);
    this.reviews.push({ token, audiences: requested, authenticated: status['authenticated'] === true });
    return status;
  }

  private evaluate(token: string, requested: readonly string[]): Record<string, unknown> {
    const wanted = requested.length > 0 ? requested : [API_SERVER_AUDIENCE];
    const parts = token.split('.');
    if (parts.length !== 3) return { user: {}, error: '[invalid bearer token, token lookup failed]' };
    const [header, payload, signature] = parts as [string, string, string];
    const expected = Buffer.from(this.sign(`${header}.${payload}`));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given))
      return { user: {}, error: '[invalid bearer token, square/go-jose: error in cryptographic primitive]' };
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Claims;
    const nowSeconds = Math.floor(this.now() / 1000);
    if (claims.exp <= nowSeconds) return { user: {}, error: '[invalid bearer token, service account token has expired]' };
    const audiences = claims.aud.filter((a) => wanted.includes(a));
    if (audiences.length === 0)
      return {
        user: {},
        error: `[invalid bearer token, token audiences ${JSON.stringify(claims.aud)} is invalid for the target audiences ${JSON.stringify(wanted)}]`,
      };
    const ns = claims['kubernetes.io'].namespace;
    const sa = claims['kubernetes.io'].serviceaccount;
    if (this.accounts.get(`${ns}/${sa.name}`) !== sa.uid) {
      return { user: {}, error: `[invalid bearer token, service account ${ns}/${sa.name} has been deleted]` };
    }
    return {
      authenticated: true,
      user: {
        username: claims.sub,
        uid: sa.uid,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'],
      },
      audiences,
    };
  }

  private sign(input: string): string {
    return createHmac('sha256', this.key).update(input).digest('base64url');
  }
}

/** POST body → TokenReview response (201, as the real API server answers a create). */
export function serveTokenReview(issuer: TokenIssuer, method: string, raw: string): { code: number; body: unknown } {
  if (method !== 'POST')
    return { code: 405, body: status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource') };
  let review: unknown;
  try {
    review = JSON.parse(raw);
  } catch (e) {
    return { code: 400, body: status(400, 'BadRequest', (e as Error).message) };
  }
  const spec = (review as { spec?: { token?: unknown; audiences?: unknown } } | null)?.spec;
  if (typeof spec?.token !== 'string' || spec.token === '') {
    return { code: 422, body: status(422, 'Invalid', 'TokenReview.authentication.k8s.io "" is invalid: spec.token: Required value') };
  }
  const audiences = Array.isArray(spec.audiences) ? spec.audiences.filter((a): a is string => typeof a === 'string') : [];
  return {
    code: 201,
    body: {
      kind: 'TokenReview',
      apiVersion: 'authentication.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec: { token: spec.token, ...(audiences.length > 0 ? { audiences } : {}) },
      status: issuer.review(spec.token, audiences),
    },
  };
}

function status(code: number, reason: string, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}
