/**
 * The W3C trace context in each event's log line (shared/trace-context.ts), from the cases of the
 * W3C Trace Context spec (https://www.w3.org/TR/trace-context/#traceparent-header), and end to end
 * through the function's HTTP server.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { traceparentOf } from '../../shared/model/trace-context.ts';
import { type Harness, startHarness } from '../../testkit/harness.ts';

const VALID = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('traceparentOf', () => {
  it.each([
    ["the spec's example", VALID, undefined, VALID],
    ['the extension when there is no header', undefined, VALID, VALID],
    ['the header over the extension', VALID, '00-11111111111111111111111111111111-2222222222222222-00', VALID],
    ['a malformed header falls back to the extension', 'garbage', VALID, VALID],
    ['version ff is invalid', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', undefined, undefined],
    ['an all-zero trace id is invalid', '00-00000000000000000000000000000000-00f067aa0ba902b7-01', undefined, undefined],
    ['an all-zero parent id is invalid', '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01', undefined, undefined],
    ['upper-case hex is invalid', '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01', undefined, undefined],
    ['a log-injection attempt is dropped', `${VALID}\n{"level":"error"}`, undefined, undefined],
    ['not a string', 42, { a: 1 }, undefined],
  ])('%s', (_name, header, extension, expected) => {
    expect(traceparentOf(header, extension)).toBe(expected);
  });
});

describe('the function logs the traceparent of the event it handled', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  async function sweep(id: string, extra: Record<string, string>): Promise<number> {
    const response = await fetch(h!.url, {
      method: 'POST',
      headers: {
        'ce-specversion': '1.0',
        'ce-id': id,
        'ce-source': '/apis/v1/namespaces/spark/pingsources/spark-exec-svc-sweep',
        'ce-type': 'dev.knative.sources.ping',
        'content-type': 'application/json',
        ...extra,
      },
      body: '{"action":"sweep"}',
    });
    await response.arrayBuffer();
    return response.status;
  }
  const lineOf = (id: string) => h!.logs.find((l) => l['msg'] === 'event handled' && l['eventId'] === id);

  it('from the HTTP header (as Knative propagates it), or the ce-traceparent extension; never a malformed one', async () => {
    h = await startHarness();
    expect(await sweep('with-header', { traceparent: VALID })).toBe(200);
    expect(lineOf('with-header')?.['traceparent']).toBe(VALID);
    expect(await sweep('with-extension', { 'ce-traceparent': VALID })).toBe(200);
    expect(lineOf('with-extension')?.['traceparent']).toBe(VALID);
    expect(await sweep('malformed', { traceparent: 'not-a-trace' })).toBe(200);
    expect(lineOf('malformed')).toBeDefined();
    expect(lineOf('malformed')).not.toHaveProperty('traceparent');
    expect(await sweep('none', {})).toBe(200);
    expect(lineOf('none')).not.toHaveProperty('traceparent');
  });
});
