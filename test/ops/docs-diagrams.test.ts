/**
 * The diagrams of the docs say what the rules do (issue 20: pictures that cannot drift silently).
 * The rule (shared/rules/decide.ts, tested in decide.test.ts): a Service is made only for an
 * executor read running; a Pending pod claims nothing. So in the start-up timeline the Service is
 * created after the pod's Running status and before the executor's JVM starts, and nothing is
 * created at the Pending ADDED; the life of a Service starts from a running executor.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
const mermaid = (text: string, kind: string): string[] => {
  const blocks = [...text.matchAll(/```mermaid\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((b) => b.trimStart().startsWith(kind));
  expect(blocks, kind).toHaveLength(1);
  return blocks[0]!.split('\n').map((l) => l.trim());
};

describe('docs/executor-recipe.md: the executor start-up timeline', () => {
  const lines = mermaid(read('docs/executor-recipe.md'), 'sequenceDiagram');
  const at = (re: RegExp): number => {
    const i = lines.findIndex((l) => re.test(l));
    expect(i, String(re)).toBeGreaterThanOrEqual(0);
    return i;
  };

  it('the Service is created after the pod runs and before Spark starts; not at the Pending add', () => {
    const added = at(/^A-->>F: ADDED, pod Pending/);
    const running = at(/^P->>A: kubelet: phase Running/);
    const create = at(/^F->>A: create Service/);
    const resolved = at(/^N-->>P: ClusterIP/);
    const spark = at(/^P->>P: exec Spark's entrypoint/);
    const register = at(/^P->>D: RegisterExecutor/);
    expect(added).toBeLessThan(running);
    expect(running).toBeLessThan(create);
    expect(create).toBeLessThan(resolved);
    expect(resolved).toBeLessThan(spark);
    expect(spark).toBeLessThan(register);
    // Between the Pending add and the Running update, the function sends nothing to the API server.
    expect(lines.slice(added, running).filter((l) => l.startsWith('F->>'))).toEqual([]);
  });
});

describe('README: the life of a Service', () => {
  const lines = mermaid(read('README.md'), 'stateDiagram-v2');
  it('begins only for a running executor whose driver runs, and ends by deletion or garbage collection', () => {
    const starts = lines.filter((l) => l.startsWith('[*] -->'));
    expect(starts).toHaveLength(1);
    expect(starts[0]).toMatch(/pod running/);
    expect(starts[0]).toMatch(/driver running/);
    expect(lines.filter((l) => l.endsWith('--> [*]')).sort()).toEqual(['Collected --> [*]', 'Deleted --> [*]']);
  });
});

describe('the operator docs name files that exist', () => {
  // README and the docs a platform engineer follows; the history in performance.md and
  // architecture.md names files as they were then, on purpose.
  const DOCS = ['README.md', 'docs/deploy.md', 'docs/executor-recipe.md', 'docs/metrics.md', 'docs/dataplanes.md', 'docs/naming.md'];
  // Made by a tool at the user's end, never in the repository (func deploy writes it).
  const MADE_BY_TOOLS = new Set(['functions/executor-service/.func/']);
  it.each(DOCS)('%s', (doc) => {
    const quoted = [
      ...read(doc).matchAll(
        /`((?:test|scripts|bench|e2e|shared|functions|testkit|proof|knative|spark|packages|demo|docs)\/[A-Za-z0-9_./-]+)`/g,
      ),
    ].map((m) => m[1]!);
    const missing = [...new Set(quoted)].filter((p) => !MADE_BY_TOOLS.has(p) && !existsSync(path.join(ROOT, p)));
    expect(missing).toEqual([]);
  });
});
