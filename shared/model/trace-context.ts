/**
 * The W3C trace context of an event, for its log line: Knative's senders and Brokers propagate
 * the `traceparent` HTTP header (W3C Trace Context, https://www.w3.org/TR/trace-context/#traceparent-header),
 * and the CloudEvents distributed-tracing extension carries the same value as the `traceparent`
 * attribute. Only a well-formed value is kept: the field is for joining logs to traces, and a
 * sender's arbitrary text does not belong in our log lines.
 */
import { z } from 'zod';

/** version-traceid-parentid-flags, lower-case hex; version ff is invalid, all-zero ids are invalid. */
const Traceparent = z.string().regex(/^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/);

/** The HTTP header if well-formed, else the CloudEvent's extension attribute if well-formed. */
export function traceparentOf(header: unknown, extension: unknown): string | undefined {
  for (const candidate of [header, extension]) {
    const parsed = Traceparent.safeParse(typeof candidate === 'string' ? candidate.trim() : candidate);
    if (parsed.success) return parsed.data;
  }
  return undefined;
}
