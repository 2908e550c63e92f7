import { connect } from 'node:net';
import { startHarness } from './test/support/harness.ts';
const h = await startHarness({});
const port = h.fn.port;
const t = Date.now();
const s = connect(port, '127.0.0.1', () => {
  s.write(`POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/cloudevents+json\r\ncontent-length: 100\r\n\r\n`);
  s.write(Buffer.alloc(50, 32));
});
s.on('data', (d) => console.log('data', Date.now() - t, d.toString().split('\r\n')[0]));
s.on('close', () => { console.log('closed', Date.now() - t); });
console.log('rt', h.fn.server.requestTimeout, h.fn.server.headersTimeout, (h.fn.server as any).connectionsCheckingInterval);
await new Promise((r) => setTimeout(r, 70000));
console.log(h.logs.slice(-3));
await h.close();
