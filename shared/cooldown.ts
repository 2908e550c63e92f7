import type { Service } from './k8s-objects.ts';
import { executorGoneAt } from './service-spec.ts';

/**
 * When a Service whose executor went may be deleted: `cooldownSeconds` after the executor went.
 * Undefined = not expiring (executor alive, unparseable mark, or cool-down 0 = keep until the driver goes).
 */
export function cooldownExpiresAt(service: Service, cooldownSeconds: number): Date | undefined {
  if (cooldownSeconds <= 0) return undefined;
  const mark = executorGoneAt(service);
  if (mark === undefined) return undefined;
  const goneAt = Date.parse(mark);
  if (Number.isNaN(goneAt)) return undefined;
  return new Date(goneAt + cooldownSeconds * 1000);
}

export function isCooldownExpired(service: Service, now: Date, cooldownSeconds: number): boolean {
  const expiresAt = cooldownExpiresAt(service, cooldownSeconds);
  return expiresAt !== undefined && expiresAt.getTime() <= now.getTime();
}
