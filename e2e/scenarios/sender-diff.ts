/**
 * Compares what the real receive adapter put on the wire with what our sender
 * (testkit/apiserversource.ts) puts on the wire for the same object: the AdapterSender in its
 * sequential mode (one event at a time, one keep-alive connection: the adapter per namespace), in
 * its concurrent mode (several at once on several connections: a Broker-like caller), and the
 * one-shot postCloudEvent the tests post single events with (fetch, not node:http). All are sent
 * for real to a local capture server (a recording proxy that answers 204 itself), so HTTP-client
 * headers count too.
 */
import { AdapterSender, goJson, podEvent, pool, postCloudEvent, type Verb } from '../../testkit/apiserversource.ts';
import type { PodBody } from '../../testkit/spark-pods.ts';
import { type RecordedRequest, startRecordingProxy } from '../adapter/recording-proxy.ts';

/** Headers whose value differs per send by design. */
const PER_SEND = new Set(['ce-id', 'ce-time', 'content-length', 'traceparent', 'tracestate']);
/** Copies of the event the concurrent mode sends at once (each on its own connection). */
export const CONCURRENT_COPIES = 4;

export interface HeaderRow {
  readonly name: string;
  readonly adapter: string | undefined;
  readonly sequential: string | undefined;
  /** The first concurrent copy's value; a copy that differs from the adapter makes the header a difference. */
  readonly concurrent: string | undefined;
  readonly oneShot: string | undefined;
}

export interface SenderComparison {
  readonly eventType: string;
  /** Every header any of them sent, with each one's value (per-send values shown as sent). */
  readonly headers: HeaderRow[];
  /** Header names (lower case) whose presence or value differs from the adapter's in any of our requests, per-send ones by presence only. */
  readonly headerDifferences: string[];
  /** The adapter's header names in the order it wrote them. */
  readonly adapterHeaderOrder: string[];
  /** goJson(parse(adapter body)) === adapter body: our Go-JSON encoder reproduces the adapter's bytes. */
  readonly bodyReencodesIdentically: boolean;
  /** Our requests' bodies for the object equal the adapter's body (the concurrent mode: every copy). */
  readonly sequentialBodyEqual: boolean;
  readonly concurrentBodyEqual: boolean;
  readonly oneShotBodyEqual: boolean;
  readonly ceTimeFormat: {
    adapter: string | undefined;
    sequential: string | undefined;
    concurrent: string | undefined;
    oneShot: string | undefined;
  };
}

/** Classifies a ce-time value: how many fractional digits, which zone form. */
function timeShape(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  const m = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(v);
  return m === null ? `unparsed: ${v}` : `${m[2]?.length ?? 0} fractional digits, zone ${m[3]}`;
}

/** Sends `object` as the tests and the bench do, in each way, to a capture server; returns the requests in that order. */
async function ourRequests(
  verb: Verb,
  object: PodBody,
  recorded: RecordedRequest,
): Promise<{ sequential: RecordedRequest; concurrent: RecordedRequest[]; oneShot: RecordedRequest }> {
  const capture = await startRecordingProxy('http://127.0.0.1:9/');
  capture.setFaultPlan(() => ({ respond: 204 }));
  try {
    // The event as the bench queues it: serialized once, when the watch delivers it.
    const event = podEvent(verb, object);
    const sequential = new AdapterSender(capture.url);
    try {
      await sequential.send(event);
    } finally {
      sequential.close();
    }
    const concurrent = new AdapterSender(capture.url, { concurrency: CONCURRENT_COPIES });
    try {
      await pool(CONCURRENT_COPIES, CONCURRENT_COPIES, async () => {
        await concurrent.send(event);
      });
    } finally {
      concurrent.close();
    }
    await postCloudEvent(capture.url, {
      type: recorded.headers['ce-type'] ?? '',
      data: object,
      source: recorded.headers['ce-source'],
      subject: recorded.headers['ce-subject'],
    });
    const all = capture.requests;
    if (all.length !== CONCURRENT_COPIES + 2) throw new Error(`capture server saw ${all.length} requests, want ${CONCURRENT_COPIES + 2}`);
    return { sequential: all[0]!, concurrent: all.slice(1, 1 + CONCURRENT_COPIES), oneShot: all[CONCURRENT_COPIES + 1]! };
  } finally {
    await capture.close();
  }
}

export async function compareWithOurSenders(recorded: RecordedRequest): Promise<SenderComparison> {
  const type = recorded.headers['ce-type'] ?? '';
  const verb = /\.(add|update|delete)$/.exec(type)?.[1] as Verb | undefined;
  if (verb === undefined || !type.startsWith('dev.knative.apiserver.resource.')) {
    throw new Error(`compareWithOurSenders takes Resource-mode events, got ${type}`);
  }
  const object = JSON.parse(recorded.body) as PodBody;
  const ours = await ourRequests(verb, object, recorded);
  const mine = [ours.sequential, ...ours.concurrent, ours.oneShot];
  const names = [...new Set([recorded, ...mine].flatMap((r) => Object.keys(r.headers)))].sort();
  const headers: HeaderRow[] = names.map((name) => ({
    name,
    adapter: recorded.headers[name],
    sequential: ours.sequential.headers[name],
    concurrent: ours.concurrent[0]!.headers[name],
    oneShot: ours.oneShot.headers[name],
  }));
  const headerDifferences = names.filter((name) => {
    const adapter = recorded.headers[name];
    return mine.some((r) =>
      PER_SEND.has(name) ? (r.headers[name] === undefined) !== (adapter === undefined) : r.headers[name] !== adapter,
    );
  });
  return {
    eventType: type,
    headers,
    headerDifferences,
    adapterHeaderOrder: recorded.rawHeaders.map(([k]) => k),
    bodyReencodesIdentically: goJson(JSON.parse(recorded.body)) === recorded.body,
    sequentialBodyEqual: ours.sequential.body === recorded.body,
    concurrentBodyEqual: ours.concurrent.every((r) => r.body === recorded.body),
    oneShotBodyEqual: ours.oneShot.body === recorded.body,
    ceTimeFormat: {
      adapter: timeShape(recorded.headers['ce-time']),
      sequential: timeShape(ours.sequential.headers['ce-time']),
      concurrent: timeShape(ours.concurrent[0]!.headers['ce-time']),
      oneShot: timeShape(ours.oneShot.headers['ce-time']),
    },
  };
}

/** One markdown table of a comparison, for the run's report. */
export function comparisonTable(c: SenderComparison): string {
  const cell = (v: string | undefined): string => (v === undefined ? '—' : `\`${v.length > 60 ? `${v.slice(0, 57)}...` : v}\``);
  const rows = c.headers.map(
    (h) =>
      `| ${h.name}${c.headerDifferences.includes(h.name) ? ' **≠**' : ''} | ${cell(h.adapter)} | ${cell(h.sequential)} | ${cell(h.concurrent)} | ${cell(h.oneShot)} |`,
  );
  return [
    `${c.eventType}`,
    '',
    `| header | real adapter | AdapterSender, sequential | AdapterSender, concurrent (${CONCURRENT_COPIES} at once) | one-shot postCloudEvent (fetch) |`,
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
