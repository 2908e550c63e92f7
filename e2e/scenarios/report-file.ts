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
