/**
 * Preloaded with `node --import ./bench/lib/module-inventory.ts <entry>`: records every module
 * the process loads (ESM and CommonJS, through module.registerHooks) with its source size, and
 * writes the list as JSON to $MODULE_INVENTORY_OUT when the process exits. Used once per cold-start
 * run to say what the entry point loads before its first answer; never used in timed runs.
 */
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

interface Loaded {
  url: string;
  format: string | undefined;
  bytes: number;
}

const out = process.env['MODULE_INVENTORY_OUT'];
const loaded: Loaded[] = [];

registerHooks({
  load(url, context, nextLoad) {
    const result = nextLoad(url, context);
    const source = result.source;
    const bytes = source === undefined || source === null ? 0 : typeof source === 'string' ? Buffer.byteLength(source) : source.byteLength;
    loaded.push({ url, format: result.format ?? undefined, bytes });
    return result;
  },
});

process.on('exit', () => {
  if (out !== undefined && out !== '')
    writeFileSync(
      out,
      JSON.stringify({ modules: loaded, builtins: (process as unknown as { moduleLoadList: readonly string[] }).moduleLoadList.length }),
    );
});
