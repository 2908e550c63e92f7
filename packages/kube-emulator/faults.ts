import { seededRandom } from './random.ts';

/**
 * Scriptable fault injection: rules are checked in the order they were added against each
 * request that reaches the API handlers; the first rule that matches and passes its
 * probability roll fires and uses up one of its `times`.
 */

export type Fault =
  | { readonly kind: 'status'; readonly code: number; readonly retryAfterSeconds?: number; readonly message?: string }
  | { readonly kind: 'delay'; readonly ms: number }
  /**
   * Answered from the state when the request arrived, sent `ms` later: a slow response, as a real
   * API server's list shows what held at some moment after it began and arrives after that.
   */
  | { readonly kind: 'late'; readonly ms: number }
  | { readonly kind: 'hang' }
  | { readonly kind: 'reset' }
  | { readonly kind: 'conflict' };

export interface FaultRule {
  readonly method?: string;
  /** Tested against the request path without the query string; a string matches as a substring. */
  readonly path?: RegExp | string;
  readonly verb?: string;
  readonly resource?: string;
  /** How many requests it fires for (default 1; Infinity allowed). */
  readonly times?: number;
  /** Chance of firing per matching request, rolled with the seeded RNG (default 1). */
  readonly probability?: number;
  readonly fault: Fault;
}

export interface FaultInjector {
  add(rule: FaultRule): void;
  clear(): void;
  /** How many faults have fired since the emulator started (clear() does not reset it). */
  injected(): number;
  /** Re-seeds the RNG used for `probability`, for reproducible runs. */
  seed(n: number): void;
}

export interface RequestFacts {
  readonly method: string;
  readonly path: string;
  readonly verb: string;
  readonly resource?: string;
}

function checkRule(rule: FaultRule): void {
  const times = rule.times ?? 1;
  if (!(times === Number.POSITIVE_INFINITY || (Number.isInteger(times) && times > 0)))
    throw new Error(`fault rule: times must be a positive integer or Infinity, got ${times}`);
  const p = rule.probability ?? 1;
  if (!(p >= 0 && p <= 1)) throw new Error(`fault rule: probability must be within [0, 1], got ${p}`);
  const f = rule.fault;
  if (f.kind === 'status' && !(Number.isInteger(f.code) && f.code >= 100 && f.code <= 599))
    throw new Error(`fault rule: status code must be an HTTP status, got ${f.code}`);
  if ((f.kind === 'delay' || f.kind === 'late') && !(f.ms >= 0)) throw new Error(`fault rule: ${f.kind} ms must be >= 0, got ${f.ms}`);
}

export class Faults implements FaultInjector {
  private rules: Array<{ rule: FaultRule; remaining: number }> = [];
  private fired = 0;
  private random = seededRandom(1);

  add(rule: FaultRule): void {
    checkRule(rule);
    this.rules.push({ rule, remaining: rule.times ?? 1 });
  }

  clear(): void {
    this.rules = [];
  }

  injected(): number {
    return this.fired;
  }

  seed(n: number): void {
    this.random = seededRandom(n);
  }

  /** The fault to apply to this request, if any rule fires. */
  match(facts: RequestFacts): Fault | undefined {
    for (const entry of this.rules) {
      const { rule } = entry;
      if (entry.remaining <= 0) continue;
      if (rule.method !== undefined && rule.method.toUpperCase() !== facts.method) continue;
      if (rule.verb !== undefined && rule.verb !== facts.verb) continue;
      if (rule.resource !== undefined && rule.resource !== facts.resource) continue;
      if (rule.path !== undefined) {
        const ok =
          typeof rule.path === 'string'
            ? facts.path.includes(rule.path)
            : new RegExp(rule.path.source, rule.path.flags.replace('g', '')).test(facts.path);
        if (!ok) continue;
      }
      if (rule.probability !== undefined && this.random() >= rule.probability) continue;
      entry.remaining -= 1;
      this.fired += 1;
      this.rules = this.rules.filter((e) => e.remaining > 0);
      return rule.fault;
    }
    return undefined;
  }
}
