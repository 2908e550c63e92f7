/**
 * Runs the emulator for manual use (`npm run emulator -- --port 8080 --kubeconfig /tmp/kc`).
 * Port: --port N, else EMULATOR_PORT, else a free one. Stops on SIGINT/SIGTERM.
 */
import { parseArgs } from 'node:util';
import { startEmulator } from './index.ts';

const USAGE = 'usage: npm run emulator -- [--port N] [--host 127.0.0.1] [--kubeconfig FILE]';
let parsed;
try {
  parsed = parseArgs({
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      kubeconfig: { type: 'string' },
      help: { type: 'boolean' },
    },
    strict: true,
  });
} catch (error) {
  console.error(`kube-emulator: ${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
  process.exit(2);
}
const { values } = parsed;
if (values.help === true) {
  console.log(USAGE);
  process.exit(0);
}

const portText = values.port ?? process.env['EMULATOR_PORT'] ?? '0';
const port = Number(portText);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`kube-emulator: invalid port ${JSON.stringify(portText)}`);
  process.exit(2);
}

const emulator = await startEmulator({ port, ...(values.host !== undefined ? { host: values.host } : {}) });
console.log(`kube-emulator listening on ${emulator.url}`);
if (values.kubeconfig !== undefined) {
  emulator.writeKubeconfig(values.kubeconfig);
  console.log(`kubeconfig written to ${values.kubeconfig} (kubectl --kubeconfig ${values.kubeconfig} get pods -A)`);
}

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  console.log(`kube-emulator: ${signal}, stopping (${emulator.requests.length} requests served)`);
  emulator.stop().then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
