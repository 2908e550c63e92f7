/** Process-wide counters, read by the soak and bench scripts and logged at shutdown. */
export interface Metrics {
  eventsHandled: number;
  eventsFailed: number;
  retries: number;
}

export function newMetrics(): Metrics {
  return { eventsHandled: 0, eventsFailed: 0, retries: 0 };
}
