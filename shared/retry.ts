import { KubeApiError } from './kube/errors.ts';

export interface RetryPolicy {
  /** Epoch ms after which no new attempt starts: the event's deadline. */
  readonly deadline: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /** [0, 1); injectable so that tests are reproducible. */
  readonly random: () => number;
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  /** Called before each retry, for counting and logging. */
  readonly onRetry?: ((error: KubeApiError, attempt: number, delayMs: number) => void) | undefined;
}

/** The event ran out of time; answered 5xx so that Knative redelivers it. */
export class DeadlineExceededError extends Error {
  override readonly name = 'DeadlineExceededError';
  readonly lastError: KubeApiError;
  constructor(lastError: KubeApiError) {
    super(`event deadline exceeded while retrying: ${lastError.message}`);
    this.lastError = lastError;
  }
}

export const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Capped exponential backoff with full jitter (delay = random × min(cap, base × 2^attempt)),
 * never shorter than the server's Retry-After, and never past the deadline.
 * Only retryable errors are retried: a 4xx other than 409 Conflict / 429 is final.
 */
export async function withRetry<T>(operation: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      if (!(error instanceof KubeApiError) || !error.retryable) throw error;
      const backoff = policy.random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
      const delay = Math.max(backoff, error.retryAfterMs ?? 0);
      if (policy.now() + delay >= policy.deadline) throw new DeadlineExceededError(error);
      policy.onRetry?.(error, attempt + 1, delay);
      await policy.sleep(delay);
    }
  }
}
