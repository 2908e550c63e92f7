/**
 * Runs the emulator for manual use (`npm run emulator -- --port 8080 --kubeconfig /tmp/kc`).
 * Port: --port N, else EMULATOR_PORT, else a free one. Stops on SIGINT/SIGTERM.
 */
import { parseArgs } from 'node:util';
import { startEmulator } from './index.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    kubeconfig: { type: 'string' },
  },
  strict: true,
});

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
