/**
 * Builds what the container runs, into one folder (default dist/): `npm run bundle`, the
 * Dockerfile, test/bundle.test.ts and the bench's cold start all build it with this script.
 *   main.cjs        the function and its packages, one minified CommonJS file (rolldown)
 *   start.cjs       the loader the container starts (functions/executor-service/start.ts)
 *   main.cjs.cache  V8 code cache of main.cjs, made by `node start.cjs --write-code-cache` with the
 *                   node running this script; the Dockerfile makes it again with the image's node
 * Usage: node scripts/bundle.ts [outDir]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const out = resolve(process.argv[2] ?? join(ROOT, 'dist'));
const ROLLDOWN = join(ROOT, 'node_modules', '.bin', 'rolldown');

function run(command: string, args: readonly string[]): void {
  const result = spawnSync(command, args, { cwd: ROOT, stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status ?? result.signal}`);
}

mkdirSync(out, { recursive: true });
for (const f of ['main.cjs', 'main.cjs.cache', 'start.cjs']) rmSync(join(out, f), { force: true });
// CommonJS: the bundle's require() of node builtins returns them as they are (ESM imports of
// builtins build a facade of every export, which loads lazy ones such as http's undici-based
// WebSocket). Minified and ASCII-only: less to read and parse, and start.ts reads it as latin1.
run(ROLLDOWN, [
  'functions/executor-service/bundle.ts',
  '--platform',
  'node',
  '--format',
  'cjs',
  '--minify',
  '--charset',
  'ascii',
  '--file',
  join(out, 'main.cjs'),
]);
run(ROLLDOWN, ['functions/executor-service/start.ts', '--platform', 'node', '--format', 'cjs', '--file', join(out, 'start.cjs')]);
assertAsciiOutsideComments(readFileSync(join(out, 'main.cjs'), 'latin1'));
run(process.execPath, [join(out, 'start.cjs'), '--write-code-cache']);

/**
 * start.ts reads main.cjs as latin1, which is exact only for ASCII. --charset ascii escapes
 * everything in code and strings; what may stay is a license comment (a name with "ä"): allowed
 * on a line that opens a comment, refused anywhere else.
 */
function assertAsciiOutsideComments(source: string): void {
  for (const line of source.split('\n')) {
    // eslint-disable-next-line no-control-regex
    if (/[^\x00-\x7f]/.test(line) && !/^\s*(\/\/|\/\*|\*)/.test(line)) {
      throw new Error(`main.cjs has non-ASCII outside a comment: ${line.slice(0, 120)}`);
    }
  }
}
