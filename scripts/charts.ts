/**
 * `npm run charts` — SVG charts from the JSON that `npm run bench` and `npm run demo:fast-fail` write,
 * for README and docs/performance.md. Nothing is measured here: every bar is a number of the files read.
 *
 *   node scripts/charts.ts [--bench FILE] [--fast-fail FILE] [--out DIR]
 *     --bench FILE      bench/run.ts's JSON with its `sequential` section (default docs/charts/bench.json)
 *     --fast-fail FILE  proof/fast-fail/run.ts's JSON (default docs/charts/fast-fail.json)
 *     --out DIR         where the SVGs go (default docs/charts)
 *
 * Writes scale-up-paced.svg (pod creation → its Service at Spark's allocation rates),
 * scale-up-vs-floor.svg (100 executors' Services against sequential creates at three API latencies)
 * and fast-fail.svg (when a task that needs blocks of 5 lost executors gives up, log scale).
 * The inputs are parsed with zod (only the fields drawn); a file that does not have them is an error.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// ---- inputs ---------------------------------------------------------------------------------

const Machine = z.object({ cpus: z.number(), cpuModel: z.string().optional(), loadavgBefore: z.array(z.number()).optional() });
export const BenchResults = z.object({
  generatedAt: z.string(),
  machine: Machine,
  sequential: z.object({
    executors: z.number(),
    batchSize: z.number(),
    latencies: z.array(
      z.object({
        latencyMs: z.number(),
        median: z.object({ lastServiceMs: z.number(), floorCreateMs: z.number() }),
      }),
    ),
    paced: z.array(
      z.object({
        podsPerSecond: z.number(),
        latencyMs: z.number(),
        pods: z.number(),
        lagMs: z.object({ p50: z.number(), p99: z.number(), max: z.number() }),
      }),
    ),
  }),
});
export type BenchResults = z.infer<typeof BenchResults>;

export const FastFailResults = z.object({
  generatedAt: z.string(),
  mode: z.string(),
  peers: z.number(),
  spark: z.object({
    factor: z.number(),
    rows: z.array(
      z.object({
        setup: z.string(),
        title: z.string(),
        driverKnows: z.boolean(),
        projected: z.object({ giveUpMs: z.number() }).nullable(),
      }),
    ),
  }),
});
export type FastFailResults = z.infer<typeof FastFailResults>;

// ---- one chart: horizontal grouped bars, linear or log axis ------------------------------------

export interface BarChart {
  title: string;
  /** Lines under the title: what was measured, where, when. */
  subtitle: readonly string[];
  /** Axis label, e.g. "ms". */
  axis: string;
  scale: 'linear' | 'log';
  categories: readonly string[];
  series: ReadonlyArray<{ name: string; values: ReadonlyArray<number | null> }>;
  /** How a value is printed at the end of its bar. */
  format: (value: number) => string;
  /** How a tick is printed (short: ticks sit close together). */
  tickFormat: (value: number) => string;
}

// Okabe–Ito: tells the series apart for the common colour-vision deficiencies too.
const COLOURS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7'];
const WIDTH = 820;
const LABEL_WIDTH = 250;
const PLOT_LEFT = LABEL_WIDTH + 20;
const PLOT_RIGHT = WIDTH - 90; // room for the last bar's value
const BAR = 16;
const BAR_GAP = 3;
const GROUP_GAP = 18;
const LINE = 17;

const esc = (s: string): string => s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
const r1 = (v: number): number => Math.round(v * 10) / 10;

/** Ticks and the value → x map of the axis. Linear: from 0 to a round maximum; log: whole decades around the values. */
export function axisOf(scale: 'linear' | 'log', values: readonly number[]): { ticks: number[]; x: (v: number) => number } {
  const span = PLOT_RIGHT - PLOT_LEFT;
  const finite = values.filter((v) => Number.isFinite(v) && (scale === 'linear' || v > 0));
  if (scale === 'log') {
    const lo = Math.floor(Math.log10(Math.min(...finite)));
    const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...finite))));
    const ticks = Array.from({ length: hi - lo + 1 }, (_, i) => 10 ** (lo + i));
    return { ticks, x: (v) => PLOT_LEFT + ((Math.log10(v) - lo) / (hi - lo)) * span };
  }
  const max = Math.max(...finite, 0);
  const step = niceStep(max / 5);
  const top = Math.max(step, Math.ceil(max / step) * step);
  const ticks = Array.from({ length: Math.round(top / step) + 1 }, (_, i) => i * step);
  return { ticks, x: (v) => PLOT_LEFT + (v / top) * span };
}

function niceStep(raw: number): number {
  if (!(raw > 0)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const f = raw / magnitude;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * magnitude;
}

/** A long label in lines of at most `chars` characters, at spaces. */
function labelLines(label: string, chars = 32): string[] {
  const lines: string[] = [];
  for (const word of label.split(' ')) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + 1 + word.length <= chars) lines[lines.length - 1] = `${last} ${word}`;
    else lines.push(word);
  }
  return lines;
}

/** The chart as a standalone SVG document. Each bar carries data-category, data-series and data-value. */
export function renderBarChart(chart: BarChart): string {
  const values = chart.series.flatMap((s) => s.values).filter((v): v is number => v !== null);
  const { ticks, x } = axisOf(chart.scale, values);
  const subtitle = labelLines(chart.subtitle.join(' '), 112);
  const top = 34 + LINE * subtitle.length + 28; // title, subtitle, legend
  const groupHeight = chart.series.length * (BAR + BAR_GAP) - BAR_GAP;
  const plotTop = top + 10;
  const plotBottom = plotTop + chart.categories.length * (groupHeight + GROUP_GAP);
  const height = plotBottom + 44;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" font-size="13">`,
    `<title>${esc(chart.title)}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="16" y="26" font-size="16" font-weight="600" fill="#1f2328">${esc(chart.title)}</text>`,
  );
  subtitle.forEach((line, i) => out.push(`<text x="16" y="${26 + LINE * (i + 1)}" fill="#59636e">${esc(line)}</text>`));
  let legendX = PLOT_LEFT;
  chart.series.forEach((s, i) => {
    const y = top - 14;
    out.push(`<rect x="${legendX}" y="${y - 10}" width="12" height="12" fill="${COLOURS[i % COLOURS.length]}"/>`);
    out.push(`<text x="${legendX + 17}" y="${y}" fill="#1f2328">${esc(s.name)}</text>`);
    legendX += 17 + s.name.length * 7 + 24;
  });
  // Grid and ticks.
  for (const t of ticks) {
    const tx = r1(x(t));
    out.push(`<line x1="${tx}" y1="${plotTop - 4}" x2="${tx}" y2="${plotBottom}" stroke="#d1d9e0" stroke-width="1"/>`);
    out.push(
      `<text class="tick" data-tick="${t}" x="${tx}" y="${plotBottom + 16}" text-anchor="middle" fill="#59636e">${esc(chart.tickFormat(t))}</text>`,
    );
  }
  out.push(
    `<text x="${r1((PLOT_LEFT + PLOT_RIGHT) / 2)}" y="${plotBottom + 36}" text-anchor="middle" fill="#59636e">${esc(chart.axis)}${chart.scale === 'log' ? ' (log scale)' : ''}</text>`,
  );
  // Bars.
  chart.categories.forEach((category, c) => {
    const groupTop = plotTop + c * (groupHeight + GROUP_GAP);
    const lines = labelLines(category);
    const labelTop = groupTop + groupHeight / 2 - ((lines.length - 1) * 15) / 2 + 4;
    lines.forEach((l, i) =>
      out.push(`<text x="${LABEL_WIDTH}" y="${r1(labelTop + i * 15)}" text-anchor="end" fill="#1f2328">${esc(l)}</text>`),
    );
    chart.series.forEach((s, i) => {
      const v = s.values[c];
      const y = groupTop + i * (BAR + BAR_GAP);
      if (v === null || v === undefined) {
        out.push(`<text x="${PLOT_LEFT + 4}" y="${y + 12}" fill="#59636e">not measured</text>`);
        return;
      }
      const end = r1(Math.max(PLOT_LEFT + 1, x(v)));
      out.push(
        `<rect data-category="${esc(category)}" data-series="${esc(s.name)}" data-value="${v}" x="${PLOT_LEFT}" y="${y}" width="${r1(end - PLOT_LEFT)}" height="${BAR}" fill="${COLOURS[i % COLOURS.length]}"/>`,
      );
      out.push(`<text x="${end + 5}" y="${y + 12}" fill="#1f2328">${esc(chart.format(v))}</text>`);
    });
  });
  out.push(`<line x1="${PLOT_LEFT}" y1="${plotTop - 4}" x2="${PLOT_LEFT}" y2="${plotBottom}" stroke="#59636e" stroke-width="1"/>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

// ---- the three charts ----------------------------------------------------------------------------

/** A tick: 0, 1 ms, 250 ms, 1.25 s, 1000 s. */
export function formatTick(ms: number): string {
  if (ms === 0) return '0';
  return ms < 1000 ? `${Number(ms.toPrecision(3))} ms` : `${Number((ms / 1000).toPrecision(3))} s`;
}

/** 0.5 ms, 12 ms, 850 ms, 2.1 s, 600 s (10 min). */
export function formatMs(ms: number): string {
  if (ms === 0) return '0';
  if (ms < 1) return `${Number(ms.toPrecision(2))} ms`;
  if (ms < 1000) return `${Number(ms.toPrecision(3))} ms`;
  if (ms < 120_000) return `${Number((ms / 1000).toPrecision(3))} s`;
  return `${Math.round(ms / 1000)} s (${Number((ms / 60_000).toPrecision(2))} min)`;
}

const when = (iso: string): string => `${iso.slice(0, 16).replace('T', ' ')} UTC`;
const machine = (b: BenchResults): string =>
  `${b.machine.cpus} CPUs${b.machine.cpuModel === undefined ? '' : ` ${b.machine.cpuModel}`}` +
  (b.machine.loadavgBefore?.[0] === undefined ? '' : `, load ${b.machine.loadavgBefore[0].toFixed(1)} at the start`);

/** Spark's default spark.kubernetes.allocation.batch.size by release, one batch a second (batch.delay 1 s). */
const SPARK_RATES: Record<number, string> = { 5: 'Spark 3.x', 10: 'Spark 4.0–4.1', 20: 'Spark 4.2' };

export function pacedChart(b: BenchResults): BarChart {
  const paced = b.sequential.paced;
  const latency = paced[0]?.latencyMs ?? 0;
  return {
    title: "A pod's creation → its Service exists, at Spark's allocation rates",
    subtitle: [
      `npm run bench (sequential, paced): one batch a second, each pod's events as it starts, ${latency} ms per API call;`,
      `the adapter's one-at-a-time sender against the API-server emulator. Run of ${when(b.generatedAt)}, ${machine(b)}.`,
    ],
    axis: 'lag, pod created → Service exists',
    scale: 'linear',
    categories: paced.map((p) => `${p.podsPerSecond} pods/s (${SPARK_RATES[p.podsPerSecond] ?? 'batch'}), ${p.pods} pods`),
    series: [
      { name: 'p50', values: paced.map((p) => p.lagMs.p50) },
      { name: 'p99', values: paced.map((p) => p.lagMs.p99) },
      { name: 'max', values: paced.map((p) => p.lagMs.max) },
    ],
    format: formatMs,
    tickFormat: formatTick,
  };
}

export function scaleUpChart(b: BenchResults): BarChart {
  const s = b.sequential;
  return {
    title: `${s.executors} executors scale up: every Service exists, against the API's floor`,
    subtitle: [
      `npm run bench (sequential): batches of ${s.batchSize}, 5 events per executor, one at a time as the adapter sends; medians.`,
      `Floor: @kubernetes/client-node doing only the ${s.executors} creates, one after another. Run of ${when(b.generatedAt)}, ${machine(b)}.`,
    ],
    axis: 'time',
    scale: 'linear',
    categories: s.latencies.map((l) => `${l.latencyMs} ms per API call`),
    series: [
      { name: 'spark-exec-svc: last Service exists', values: s.latencies.map((l) => l.median.lastServiceMs) },
      { name: `floor: ${s.executors} sequential creates`, values: s.latencies.map((l) => l.median.floorCreateMs) },
    ],
    format: formatMs,
    tickFormat: formatTick,
  };
}

export function fastFailChart(f: FastFailResults): BarChart {
  const setups = [...new Set(f.spark.rows.map((r) => r.setup))];
  const title = (setup: string) => f.spark.rows.find((r) => r.setup === setup)?.title ?? setup;
  const value = (setup: string, knows: boolean) =>
    f.spark.rows.find((r) => r.setup === setup && r.driverKnows === knows)?.projected?.giveUpMs ?? null;
  const scale = Math.round(1 / f.spark.factor);
  return {
    title: `A reduce task that needs blocks of ${f.peers} lost executors: when it gives up`,
    subtitle: [
      `npm run demo:fast-fail (${f.mode}): Spark's fetch path re-enacted at settings scaled ×1/${scale}, projected to the real ones`,
      `(connect timeout 120 s, retryWait 5 s, maxRetries 3). Run of ${when(f.generatedAt)}.`,
    ],
    axis: 'time until FetchFailedException, at the real settings',
    scale: 'log',
    categories: setups.map(title),
    series: [
      { name: 'driver knows the executor is dead', values: setups.map((s) => value(s, true)) },
      { name: 'driver does not know yet', values: setups.map((s) => value(s, false)) },
    ],
    format: formatMs,
    tickFormat: formatTick,
  };
}

export const CHART_FILES = {
  paced: 'scale-up-paced.svg',
  scaleUp: 'scale-up-vs-floor.svg',
  fastFail: 'fast-fail.svg',
} as const;

/** The SVG documents by file name. */
export function renderCharts(bench: BenchResults, fastFail: FastFailResults): Record<string, string> {
  return {
    [CHART_FILES.paced]: renderBarChart(pacedChart(bench)),
    [CHART_FILES.scaleUp]: renderBarChart(scaleUpChart(bench)),
    [CHART_FILES.fastFail]: renderBarChart(fastFailChart(fastFail)),
  };
}

export function readJson<T>(file: string, schema: z.ZodType<T>): T {
  const parsed = schema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  if (!parsed.success) throw new Error(`${file}: not the JSON this chart needs: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

function main(): void {
  const { values } = parseArgs({
    options: {
      bench: { type: 'string', default: path.join(REPO_ROOT, 'docs/charts/bench.json') },
      'fast-fail': { type: 'string', default: path.join(REPO_ROOT, 'docs/charts/fast-fail.json') },
      out: { type: 'string', default: path.join(REPO_ROOT, 'docs/charts') },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log('usage: node scripts/charts.ts [--bench FILE] [--fast-fail FILE] [--out DIR]');
    return;
  }
  const charts = renderCharts(readJson(values.bench, BenchResults), readJson(values['fast-fail'], FastFailResults));
  mkdirSync(values.out, { recursive: true });
  for (const [name, svg] of Object.entries(charts)) {
    writeFileSync(path.join(values.out, name), svg);
    console.log(path.relative(process.cwd(), path.join(values.out, name)) || name);
  }
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
