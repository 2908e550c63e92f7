/**
 * Compares what the real receive adapter put on the wire with what our two senders put on the wire
 * for the same object: the tests' postCloudEvent (test/support/cloudevents.ts) and the bench's
 * AdapterSender (bench/lib/adapter.ts). Both of ours are sent for real to a local capture server
 * (a recording proxy that answers 204 itself), so HTTP-client headers count too.
 */
import { AdapterSender, adapterPodEvent } from '../../bench/lib/adapter.ts';
import type { PodBody } from '../../bench/lib/load.ts';
import { goJson, postCloudEvent } from '../../test/support/cloudevents.ts';
import { type RecordedRequest, startRecordingProxy } from '../adapter/recording-proxy.ts';

/** Headers whose value differs per send by design. */
const PER_SEND = new Set(['ce-id', 'ce-time', 'content-length', 'traceparent', 'tracestate']);

export interface HeaderRow {
  readonly name: string;
  readonly adapter: string | undefined;
  readonly tests: string | undefined;
  readonly bench: string | undefined;
}

export interface SenderComparison {
  readonly eventType: string;
  /** Every header any of the three sent, with each one's value (per-send values shown as sent). */
  readonly headers: HeaderRow[];
  /** Header names (lower case) whose presence or value differs, per-send ones compared by presence only. */
  readonly headerDifferences: string[];
  /** The adapter's header names in the order it wrote them. */
  readonly adapterHeaderOrder: string[];
  /** goJson(parse(adapter body)) === adapter body: our Go-JSON encoder reproduces the adapter's bytes. */
  readonly bodyReencodesIdentically: boolean;
  /** Our senders' bodies for the object equal the adapter's body. */
  readonly testsBodyEqual: boolean;
  readonly benchBodyEqual: boolean;
  readonly ceTimeFormat: { adapter: string | undefined; tests: string | undefined; bench: string | undefined };
}

/** Classifies a ce-time value: how many fractional digits, which zone form. */
function timeShape(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  const m = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(v);
  return m === null ? `unparsed: ${v}` : `${m[2]?.length ?? 0} fractional digits, zone ${m[3]}`;
}

export async function compareWithOurSenders(recorded: RecordedRequest): Promise<SenderComparison> {
  const type = recorded.headers['ce-type'] ?? '';
  const verb = /\.(add|update|delete)$/.exec(type)?.[1] as 'add' | 'update' | 'delete' | undefined;
  if (verb === undefined || !type.startsWith('dev.knative.apiserver.resource.')) {
    throw new Error(`compareWithOurSenders takes Resource-mode events, got ${type}`);
  }
  const object = JSON.parse(recorded.body) as PodBody;
  const capture = await startRecordingProxy('http://127.0.0.1:9/');
  capture.setFaultPlan(() => ({ respond: 204 }));
  try {
    await postCloudEvent(capture.url, {
      type,
      data: object,
      source: recorded.headers['ce-source'],
      subject: recorded.headers['ce-subject'],
    });
    const bench = new AdapterSender(capture.url);
    try {
      await bench.send(adapterPodEvent(verb, object));
    } finally {
      bench.close();
    }
    const [tests, benchReq] = capture.requests;
    if (tests === undefined || benchReq === undefined) throw new Error('capture server saw fewer than two requests');
    const names = [...new Set([...Object.keys(recorded.headers), ...Object.keys(tests.headers), ...Object.keys(benchReq.headers)])].sort();
    const headers: HeaderRow[] = names.map((name) => ({ name, adapter: recorded.headers[name], tests: tests.headers[name], bench: benchReq.headers[name] }));
    const headerDifferences = headers
      .filter((h) => {
        if (PER_SEND.has(h.name)) return [h.adapter, h.tests, h.bench].some((v) => (v === undefined) !== (h.adapter === undefined));
        return h.tests !== h.adapter || h.bench !== h.adapter;
      })
      .map((h) => h.name);
    return {
      eventType: type,
      headers,
      headerDifferences,
      adapterHeaderOrder: recorded.rawHeaders.map(([k]) => k),
      bodyReencodesIdentically: goJson(JSON.parse(recorded.body)) === recorded.body,
      testsBodyEqual: tests.body === recorded.body,
      benchBodyEqual: benchReq.body === recorded.body,
      ceTimeFormat: { adapter: timeShape(recorded.headers['ce-time']), tests: timeShape(tests.headers['ce-time']), bench: timeShape(benchReq.headers['ce-time']) },
    };
  } finally {
    await capture.close();
  }
}

/** One markdown table of a comparison, for the run's report. */
export function comparisonTable(c: SenderComparison): string {
  const cell = (v: string | undefined): string => (v === undefined ? '—' : `\`${v.length > 60 ? `${v.slice(0, 57)}...` : v}\``);
  const rows = c.headers.map((h) => `| ${h.name}${c.headerDifferences.includes(h.name) ? ' **≠**' : ''} | ${cell(h.adapter)} | ${cell(h.tests)} | ${cell(h.bench)} |`);
  return [`${c.eventType}`, '', '| header | real adapter | tests (postCloudEvent) | bench (AdapterSender) |', '|---|---|---|---|', ...rows].join('\n');
}
