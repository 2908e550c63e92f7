/** Small statistics and formatting helpers for the bench tables. */

/** Nearest-rank percentile (p in 0..100) of unsorted samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export const median = (samples: readonly number[]): number => percentile(samples, 50);

export const sum = (samples: readonly number[]): number => samples.reduce((a, b) => a + b, 0);

export interface Latency {
  readonly n: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly meanMs: number;
  /** Wall-clock time for all n, start of the first to end of the last. */
  readonly wallMs: number;
  readonly perSecond: number;
}

export function latency(samples: readonly number[], wallMs: number): Latency {
  return {
    n: samples.length,
    p50Ms: round(percentile(samples, 50), 3),
    p99Ms: round(percentile(samples, 99), 3),
    meanMs: round(sum(samples) / samples.length, 3),
    wallMs: round(wallMs, 1),
    perSecond: round((samples.length / wallMs) * 1000, 0),
  };
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export const ratio = (ours: number, floor: number): number => round(ours / floor, 2);

export const fmtMs = (ms: number): string => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

export const fmtX = (x: number): string => `${x.toFixed(2)}×`;

export const fmtMiB = (kib: number): string => `${(kib / 1024).toFixed(1)} MiB`;

/** A plain-text table with aligned columns (Markdown-compatible). */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}
