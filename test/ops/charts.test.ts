/**
 * `npm run charts` (scripts/charts.ts): the pictures in README are the numbers of the committed runs,
 * drawn on the scale they claim. From the brief (issue 20): charts made by a script from the bench /
 * proof JSON — scale-up against Spark's allocation rates, the fast-fail comparison on a log scale.
 *  - a log axis puts a value on the tick of that value, and 10^1.5 halfway between 10 and 100;
 *  - a linear axis makes bar lengths proportional to values, from 0;
 *  - every bar of the committed SVGs is a number of the committed JSON, read here independently;
 *  - the committed SVGs are what the script renders from the committed JSON (they cannot drift);
 *  - the script takes the JSON paths on its command line, and refuses a file without the fields.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { type FastFailResults, renderBarChart, renderCharts } from '../../scripts/charts.ts';
import { BenchResults, FastFailResults as FastFailSchema } from '../../scripts/charts.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CHARTS = path.join(ROOT, 'docs/charts');
const work = mkdtempSync(path.join(os.tmpdir(), 'sxs-charts-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface Bar {
  category: string;
  series: string;
  value: number;
  x: number;
  width: number;
}
const attr = (tag: string, name: string): string => {
  const m = new RegExp(`\\b${name}="([^"]*)"`).exec(tag);
  if (m === null) throw new Error(`no ${name} in ${tag}`);
  return m[1]!.replaceAll('&amp;', '&').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"');
};
function bars(svg: string): Bar[] {
  return [...svg.matchAll(/<rect [^>]*data-value="[^"]*"[^>]*>/g)].map(([tag]) => ({
    category: attr(tag, 'data-category'),
    series: attr(tag, 'data-series'),
    value: Number(attr(tag, 'data-value')),
    x: Number(attr(tag, 'x')),
    width: Number(attr(tag, 'width')),
  }));
}
function ticks(svg: string): Map<number, number> {
  return new Map([...svg.matchAll(/<text class="tick" [^>]*>/g)].map(([tag]) => [Number(attr(tag, 'data-tick')), Number(attr(tag, 'x'))]));
}
const end = (b: Bar): number => b.x + b.width;

const chart = (values: number[], scale: 'linear' | 'log') =>
  renderBarChart({
    title: 't',
    subtitle: ['s'],
    axis: 'a',
    scale,
    categories: values.map((_, i) => `c${i}`),
    series: [{ name: 'only', values }],
    format: String,
    tickFormat: String,
  });

describe('the axes', () => {
  it('log: a decade value ends on its tick; 10^1.5 ends halfway between the ticks of 10 and 100', () => {
    const svg = chart([1, 10 ** 1.5, 1000, 1_000_000], 'log');
    const t = ticks(svg);
    expect([...t.keys()]).toEqual([1, 10, 100, 1000, 10_000, 100_000, 1_000_000]);
    const b = bars(svg);
    expect(end(b[2]!)).toBeCloseTo(t.get(1000)!, 0);
    expect(end(b[3]!)).toBeCloseTo(t.get(1_000_000)!, 0);
    expect(end(b[1]!)).toBeCloseTo((t.get(10)! + t.get(100)!) / 2, 0);
    // Equal ratios, equal distances: the decade ticks are evenly spaced.
    const xs = [...t.values()];
    for (let i = 1; i < xs.length - 1; i++) expect(xs[i + 1]! - xs[i]!).toBeCloseTo(xs[1]! - xs[0]!, 0);
  });

  it('linear: bar lengths proportional to the values, from the tick 0', () => {
    const svg = chart([50, 100, 400, 1234], 'linear');
    const t = ticks(svg);
    expect(t.has(0)).toBe(true);
    const b = bars(svg);
    for (const bar of b) expect(bar.x).toBeCloseTo(t.get(0)!, 1);
    const perUnit = b[3]!.width / 1234;
    for (const bar of b) expect(bar.width / bar.value).toBeCloseTo(perUnit, 3);
    // The largest value is within the axis: its end at or before the last tick.
    expect(end(b[3]!)).toBeLessThanOrEqual(Math.max(...t.values()) + 0.1);
  });
});

describe('the committed pictures', () => {
  const benchJson = JSON.parse(readFileSync(path.join(CHARTS, 'bench.json'), 'utf8'));
  const fastFailJson = JSON.parse(readFileSync(path.join(CHARTS, 'fast-fail.json'), 'utf8'));
  const svg = (name: string) => readFileSync(path.join(CHARTS, name), 'utf8');

  it('are what `npm run charts` renders from the committed JSON', () => {
    const rendered = renderCharts(BenchResults.parse(benchJson), FastFailSchema.parse(fastFailJson));
    expect(Object.keys(rendered).sort()).toEqual(['fast-fail.svg', 'scale-up-paced.svg', 'scale-up-vs-floor.svg']);
    for (const [name, text] of Object.entries(rendered)) expect(svg(name), `docs/charts/${name}: run npm run charts`).toBe(text);
  });

  it("scale-up at Spark's allocation rates: p50, p99, max lag of each paced rate of the bench run", () => {
    const drawn = bars(svg('scale-up-paced.svg'));
    const paced = benchJson.sequential.paced as { podsPerSecond: number; lagMs: { p50: number; p99: number; max: number } }[];
    expect(paced.map((p) => p.podsPerSecond)).toEqual([5, 10, 20]);
    expect(drawn.map((b) => b.value)).toEqual(paced.flatMap((p) => [p.lagMs.p50, p.lagMs.p99, p.lagMs.max]));
    for (const b of drawn) expect(b.category).toMatch(/^(5|10|20) pods\/s/);
  });

  it('scale-up against the floor: the median time to the last Service and the floor of each API latency', () => {
    const drawn = bars(svg('scale-up-vs-floor.svg'));
    const lat = benchJson.sequential.latencies as { latencyMs: number; median: { lastServiceMs: number; floorCreateMs: number } }[];
    const byCategory = (l: { latencyMs: number }) =>
      drawn.filter((b) => b.category === `${l.latencyMs} ms per API call`).map((b) => b.value);
    for (const l of lat) expect(byCategory(l)).toEqual([l.median.lastServiceMs, l.median.floorCreateMs]);
  });

  it('fast fail, log scale: the projected give-up of every Spark row of the proof run, 1 ms … 1000 s', () => {
    const text = svg('fast-fail.svg');
    expect(text).toContain('(log scale)');
    const drawn = bars(text);
    const rows = fastFailJson.spark.rows as { title: string; driverKnows: boolean; projected: { giveUpMs: number } }[];
    expect(drawn).toHaveLength(rows.length);
    for (const r of rows) {
      const b = drawn.find((d) => d.category === r.title && d.series.startsWith(r.driverKnows ? 'driver knows' : 'driver does not'));
      expect(b?.value, r.title).toBe(r.projected.giveUpMs);
    }
    // The Service row once the driver knows is milliseconds; the pod-IP rows at Spark's defaults ten minutes.
    const t = ticks(text);
    expect(Math.min(...t.keys())).toBeLessThanOrEqual(1);
    expect(Math.max(...t.keys())).toBeGreaterThanOrEqual(600_000);
  });

  it('README shows them', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    for (const name of ['fast-fail.svg', 'scale-up-paced.svg', 'scale-up-vs-floor.svg']) expect(readme).toContain(`](docs/charts/${name})`);
  });
});

describe('scripts/charts.ts on the command line', () => {
  const node = process.execPath;
  const script = path.join(ROOT, 'scripts/charts.ts');

  it('draws from the JSON files it is given, into the folder it is given', () => {
    const out = path.join(work, 'out');
    const ff: FastFailResults = {
      generatedAt: '2026-01-02T03:04:05.000Z',
      mode: 'netns',
      peers: 3,
      spark: {
        factor: 1 / 60,
        rows: [
          { setup: 'a', title: 'A', driverKnows: true, projected: { giveUpMs: 360_000 } },
          { setup: 'b', title: 'B', driverKnows: true, projected: { giveUpMs: 2 } },
        ],
      },
    };
    writeFileSync(path.join(work, 'ff.json'), JSON.stringify(ff));
    const r = spawnSync(
      node,
      [script, '--bench', path.join(CHARTS, 'bench.json'), '--fast-fail', path.join(work, 'ff.json'), '--out', out],
      { encoding: 'utf8' },
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const drawn = bars(readFileSync(path.join(out, 'fast-fail.svg'), 'utf8'));
    expect(drawn.map((b) => [b.category, b.value])).toEqual([
      ['A', 360_000],
      ['B', 2],
    ]);
  });

  it('refuses a file that is not the results it draws, naming the file', () => {
    writeFileSync(path.join(work, 'bad.json'), JSON.stringify({ generatedAt: 'x', machine: { cpus: 2 } }));
    const r = spawnSync(node, [script, '--bench', path.join(work, 'bad.json'), '--out', path.join(work, 'bad-out')], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`${path.join(work, 'bad.json')}: not the JSON this chart needs`);
    expect(r.stderr).toContain('sequential');
  });
});
