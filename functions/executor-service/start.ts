/**
 * What the container runs (`node start.cjs`): loads the bundle main.cjs next to this file with
 * the V8 code cache made for it at image build time (main.cjs.cache), then calls its main().
 *
 * Why: parsing and compiling the 2 MB bundle, and lazily compiling the functions its module
 * top level runs (@kubernetes/client-node's ~900 model classes, zod schemas), was most of the
 * cold start. A code cache taken after the bundle has been evaluated holds the bytecode of every
 * function compiled so far, not only the top level (vm.Script#createCachedData: "functions that
 * have been compiled are included", https://nodejs.org/docs/latest-v22.x/api/vm.html#scriptcreatecacheddata);
 * Node's own NODE_COMPILE_CACHE saves the cache right after compiling, before anything ran.
 *
 * At run time this file only reads: it works on a read-only root filesystem. The cache is
 * produced by `node start.cjs --write-code-cache`, with the same node binary that runs it (V8
 * rejects a cache of another V8 version or flags; then this warns once and compiles from source).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire, wrap } from 'node:module';
import { join } from 'node:path';
import { Script } from 'node:vm';
import { crc32 } from 'node:zlib';

// Before anything else: on an older Node the bundle fails deep inside a dependency with a dump of
// minified code (node:zlib crc32 needs 22.2; @kubernetes/client-node 2.x needs 22.19, its
// package.json "engines"). Say it in one line instead. Same bound as package.json "engines".
const MIN_NODE = [22, 19] as const;
{
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major < MIN_NODE[0] || (major === MIN_NODE[0] && minor < MIN_NODE[1])) {
    process.stderr.write(`spark-exec-svc needs Node >= ${MIN_NODE.join('.')}, this is ${process.version}\n`);
    process.exit(1);
  }
}

const BUNDLE = join(__dirname, 'main.cjs');
const CACHE = `${BUNDLE}.cache`;
/** Cache file: crc32 and length of the source it was made for (V8 itself checks only the length), then V8's data. */
const HEADER_BYTES = 8;

interface Bundle {
  main(): Promise<void>;
}

function warn(msg: string, fields: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), level: 'warn', msg, ...fields })}\n`);
}

// latin1: one byte per character, no UTF-8 decoding, and V8 keeps a one-byte string. Exact for
// this bundle: it is built with --charset ascii (non-ASCII only in comments); scripts/bundle.ts checks.
const bytes = readFileSync(BUNDLE);
const source = bytes.toString('latin1');
const fingerprint = Buffer.alloc(HEADER_BYTES);
fingerprint.writeUInt32LE(crc32(bytes, 0), 0);
fingerprint.writeUInt32LE(bytes.byteLength, 4);

function compile(cachedData: Buffer | undefined): Script {
  // The CommonJS wrapper Node itself uses; filename keeps stack traces pointing at main.cjs.
  return new Script(wrap(source), { filename: BUNDLE, ...(cachedData === undefined ? {} : { cachedData }) });
}

function readCache(): Buffer | undefined {
  let file: Buffer;
  try {
    file = readFileSync(CACHE);
  } catch (error) {
    warn('code cache not used', { reason: `cannot read ${CACHE}: ${(error as NodeJS.ErrnoException).code ?? String(error)}` });
    return undefined;
  }
  if (!file.subarray(0, HEADER_BYTES).equals(fingerprint)) {
    warn('code cache not used', { reason: `${CACHE} was made for another main.cjs` });
    return undefined;
  }
  return file.subarray(HEADER_BYTES);
}

function evaluate(script: Script): Bundle {
  const module = { exports: {} as Bundle, filename: BUNDLE, id: BUNDLE, loaded: false };
  (script.runInThisContext() as (...args: unknown[]) => void).call(
    module.exports,
    module.exports,
    createRequire(BUNDLE),
    module,
    BUNDLE,
    __dirname,
  );
  return module.exports;
}

if (process.argv[2] === '--write-code-cache') {
  // Image build time: evaluate the bundle (no config read, no server, nothing started), then save
  // the bytecode of everything compiled so far; check that this node accepts it.
  const script = compile(undefined);
  evaluate(script);
  writeFileSync(CACHE, Buffer.concat([fingerprint, script.createCachedData()]));
  const check = compile(readCache());
  if (check.cachedDataRejected !== false) {
    process.stderr.write(`${CACHE}: V8 rejected the code cache it just made\n`);
    process.exit(1);
  }
  process.stdout.write(`wrote ${CACHE}\n`);
} else {
  const cachedData = readCache();
  const script = compile(cachedData);
  if (cachedData !== undefined && script.cachedDataRejected === true) {
    warn('code cache not used', { reason: `V8 rejected ${CACHE} (made by another node version?)`, node: process.version });
  }
  evaluate(script)
    .main()
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
