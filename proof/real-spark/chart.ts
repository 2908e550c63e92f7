/**
 * The real-Spark proof's chart, made from its JSON results only (so anyone can re-make it):
 *
 *   node proof/real-spark/chart.ts [results.json] [chart.svg]     (defaults: next to this file)
 *
 * One bar per run (Spark line × set-up), from the executor's loss to the job's end, with marks at
 * the first FetchFailed and at the stage's resubmission. Plain SVG text, no dependency.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

export const ChartRun = z.looseObject({
  sparkVersion: z.string(),
  variant: z.looseObject({ key: z.string(), title: z.string(), short: z.string().optional() }),
  timings: z.looseObject({
    firstFetchFailedSinceLossMs: z.number().optional().nullable(),
    stageResubmittedSinceLossMs: z.number().optional().nullable(),
    jobEndSinceLossMs: z.number().optional().nullable(),
  }),
  firstFetchFailed: z.looseObject({ cause: z.string() }).optional().nullable(),
  fetchFailures: z.array(z.looseObject({ sinceLossMs: z.number(), host: z.string().optional().nullable(), cause: z.string() })).optional(),
});
export const Results = z.looseObject({ measuredAt: z.string(), runs: z.array(ChartRun) });

/** What the chart reads of a run (a FetchLossReport has it). */
export interface ChartRunInput {
  readonly sparkVersion: string;
  readonly variant: { readonly key: string; readonly title: string; readonly short?: string | undefined };
  readonly timings: {
    readonly firstFetchFailedSinceLossMs?: number | null | undefined;
    readonly stageResubmittedSinceLossMs?: number | null | undefined;
    readonly jobEndSinceLossMs?: number | null | undefined;
  };
  readonly firstFetchFailed?: { readonly cause: string } | null | undefined;
  readonly fetchFailures?: ReadonlyArray<{
    readonly sinceLossMs: number;
    readonly host?: string | null | undefined;
    readonly cause: string;
  }>;
}

/** The first FetchFailed that names the lost executor (a fetch from it failed), else the first of any kind. */
export function firstPeerFailure(r: ChartRunInput): { sinceLossMs: number; cause: string; peer: boolean } | undefined {
  const peer = r.fetchFailures?.find((f) => f.host !== undefined && f.host !== null);
  if (peer !== undefined) return { sinceLossMs: peer.sinceLossMs, cause: peer.cause, peer: true };
  const ms = r.timings.firstFetchFailedSinceLossMs;
  return ms === undefined || ms === null ? undefined : { sinceLossMs: ms, cause: r.firstFetchFailed?.cause ?? '', peer: false };
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const secs = (ms: number): string => (ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`);

export function renderChart(results: { readonly measuredAt: string; readonly runs: readonly ChartRunInput[] }): string {
  const runs = results.runs;
  const left = 380;
  const right = 40;
  const width = 1060;
  const rowH = 34;
  const top = 56;
  const plotW = width - left - right;
  const max = Math.max(10_000, ...runs.map((r) => r.timings.jobEndSinceLossMs ?? 0));
  // a round axis end: 10 s steps up to 60 s, then 30 s steps
  const step = max <= 60_000 ? 10_000 : 30_000;
  const axisEnd = Math.ceil(max / step) * step;
  const x = (ms: number): number => left + (ms / axisEnd) * plotW;
  const height = top + runs.length * rowH + 70;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="13">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="20" y="22" font-size="15" font-weight="bold">Real Spark, one executor lost mid-fetch: time from the loss (s)</text>`,
    `<text x="20" y="40" fill="#555">measured ${esc(results.measuredAt)}; bar = loss → job end, ◆ first FetchFailed of a fetch from the lost executor, | stage resubmitted</text>`,
  ];
  for (let t = 0; t <= axisEnd; t += step) {
    out.push(`<line x1="${x(t)}" y1="${top - 6}" x2="${x(t)}" y2="${top + runs.length * rowH}" stroke="#ddd"/>`);
    out.push(`<text x="${x(t)}" y="${top + runs.length * rowH + 16}" text-anchor="middle" fill="#555">${t / 1000}</text>`);
  }
  runs.forEach((r, i) => {
    const y = top + i * rowH;
    const color = r.variant.key === 'c' ? '#2a9d4b' : r.variant.key === 'b' ? '#e9a23b' : '#d1495b';
    out.push(
      `<text x="${left - 8}" y="${y + 14}" text-anchor="end">${esc(`Spark ${r.sparkVersion} (${r.variant.key}) ${r.variant.short ?? r.variant.title}`)}</text>`,
    );
    const end = r.timings.jobEndSinceLossMs;
    if (end !== undefined && end !== null) {
      out.push(`<rect x="${left}" y="${y + 3}" width="${Math.max(1, x(end) - left)}" height="16" fill="${color}" opacity="0.8"/>`);
      out.push(`<text x="${x(end) + 4}" y="${y + 15}" fill="#222">${secs(end)}</text>`);
    }
    const ff = firstPeerFailure(r);
    if (ff !== undefined) {
      const cx = x(ff.sinceLossMs);
      out.push(`<path d="M${cx} ${y + 2} l6 9 l-6 9 l-6 -9 z" fill="#222"/>`);
      out.push(
        `<text x="${cx}" y="${y + 31}" text-anchor="middle" font-size="11" fill="#333">${esc(`${secs(ff.sinceLossMs)}: ${ff.cause}`)}</text>`,
      );
    }
    const rs = r.timings.stageResubmittedSinceLossMs;
    if (rs !== undefined && rs !== null)
      out.push(`<line x1="${x(rs)}" y1="${y}" x2="${x(rs)}" y2="${y + 22}" stroke="#222" stroke-width="2"/>`);
  });
  out.push(
    `<text x="${left}" y="${height - 14}" fill="#555">seconds after the executor stopped answering (packets dropped) and its pod was deleted</text>`,
  );
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const here = fileURLToPath(new URL('.', import.meta.url));
  const input = process.argv[2] ?? join(here, 'results.json');
  const output = process.argv[3] ?? join(here, 'chart.svg');
  writeFileSync(output, renderChart(Results.parse(JSON.parse(readFileSync(input, 'utf8')))));
  process.stdout.write(`${output}\n`);
}
