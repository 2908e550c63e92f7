import { KubeApiError } from './errors.ts';

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
 * An attempt still running at the deadline is not waited for (its request ends at its own
 * timeout): the event is answered by its deadline, not deadline + request timeout.
 */
export async function withRetry<T>(operation: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await beforeDeadline(operation, policy);
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

function deadlineError(): DeadlineExceededError {
  return new DeadlineExceededError(new KubeApiError('API request still unanswered at the event deadline', 0, 'Timeout', true, undefined));
}

/** Runs one attempt, but gives up on it (DeadlineExceededError) when the event's deadline comes first. */
async function beforeDeadline<T>(operation: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  const remaining = policy.deadline - policy.now();
  if (remaining <= 0) throw deadlineError();
  let timer: NodeJS.Timeout | undefined;
  const attempt = operation();
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(deadlineError()), remaining);
  });
  try {
    return await Promise.race([attempt, expired]);
  } finally {
    clearTimeout(timer);
    attempt.catch(() => undefined); // an abandoned attempt may still fail later: not an unhandled rejection
  }
}
