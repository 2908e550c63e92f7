/**
 * A scenario's report files in its log dir. The dir is made here: a report is written in afterAll
 * even when the plane (which makes the dir for its logs) never started, and must then still land.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function writeReportFile(logDir: string, name: string, text: string): string {
  mkdirSync(logDir, { recursive: true });
  const file = join(logDir, name);
  writeFileSync(file, text);
  return file;
}

export function writeJsonReport(logDir: string, name: string, report: unknown): string {
  return writeReportFile(logDir, name, `${JSON.stringify(report, null, 2)}\n`);
}

/**
 * The end of a scenario with a plane (its afterAll): the report written, then the plane and the
 * cluster stopped — each step even when the one before it failed, the first failure thrown.
 */
export async function reportAndStop(
  cluster: { readonly endpoints: { readonly logDir: string }; stop(): Promise<void> } | undefined,
  plane: { stop(): Promise<void> } | undefined,
  name: string,
  report: unknown,
): Promise<void> {
  try {
    if (cluster !== undefined) writeJsonReport(cluster.endpoints.logDir, name, report);
  } finally {
    try {
      await plane?.stop();
    } finally {
      await cluster?.stop();
    }
  }
}
