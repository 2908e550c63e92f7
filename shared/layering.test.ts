/**
 * The folders of shared/ are layers (docs/architecture.md): what API objects mean (model) below
 * the pure decisions (rules) below the I/O that carries them out (engine) below what starts a
 * reconciliation (triggers); the API client (kube) beside the rules, on the model only; config,
 * log and the bounded LRU (ops) under everything; the metrics, which name the vocabulary of the
 * model, the client and the outcome table, above those and imported by the function only.
 * An import goes down a rank or stays in its folder; nothing in shared/ imports the function,
 * the tests or the bench; and no file reaches itself again by following imports.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SHARED = dirname(fileURLToPath(import.meta.url));

/** The rank of each layer, from the bottom; a file's layer is its folder (ops/metrics.ts is its own). */
const RANK: Readonly<Record<string, number>> = { ops: 0, model: 1, rules: 2, kube: 2, metrics: 3, engine: 3, triggers: 4 };

function layerOf(file: string): string {
  const rel = relative(SHARED, file);
  if (rel === join('ops', 'metrics.ts')) return 'metrics';
  const folder = rel.split(/[\\/]/)[0]!;
  if (!(folder in RANK)) throw new Error(`${rel}: a file of shared/ outside the layers ${Object.keys(RANK).join(', ')}`);
  return folder;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') && !path.endsWith('.test.ts') ? [path] : [];
  });
}

/** Every module specifier of a file: static imports and re-exports (type-only ones too: a type arrow is an arrow), dynamic imports. */
function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gms)) found.push(m[1]!);
  for (const m of text.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm)) found.push(m[1]!);
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(m[1]!);
  return found;
}

const files = sourceFiles(SHARED);
const graph = new Map<string, string[]>(
  files.map((file) => [
    file,
    specifiers(readFileSync(file, 'utf8'))
      .filter((s) => s.startsWith('.'))
      .map((s) => resolve(dirname(file), s)),
  ]),
);
const name = (file: string): string => relative(SHARED, file);

describe('the import graph of shared/', () => {
  it('finds the files and their imports (the parser is not blind)', () => {
    expect(files.length).toBeGreaterThan(20);
    expect(graph.get(join(SHARED, 'engine', 'reconcile.ts'))).toContain(join(SHARED, 'rules', 'decide.ts'));
    expect(specifiers("import type { A } from './a.ts';\nexport { B } from '../b.ts';\nconst c = await import('./c.ts');")).toEqual([
      './a.ts',
      '../b.ts',
      './c.ts',
    ]);
  });

  it('imports only downward or within a folder', () => {
    const upward: string[] = [];
    for (const [file, targets] of graph) {
      for (const target of targets) {
        if (!target.startsWith(`${SHARED}/`)) {
          upward.push(`${name(file)} → ${relative(SHARED, target)} (outside shared/)`);
          continue;
        }
        const [from, to] = [layerOf(file), layerOf(target)];
        if (from !== to && RANK[to]! >= RANK[from]!) upward.push(`${name(file)} (${from}) → ${name(target)} (${to})`);
      }
    }
    expect(upward).toEqual([]);
  });

  it('has no circle', () => {
    const circles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        circles.push([...path.slice(path.indexOf(file)), file].map(name).join(' → '));
        return;
      }
      state.set(file, 'open');
      for (const target of graph.get(file) ?? []) visit(target, [...path, file]);
      state.set(file, 'done');
    };
    for (const file of files) visit(file, []);
    expect(circles).toEqual([]);
  });
});
