/**
 * A minimal Chrome DevTools Protocol client for a child started with --inspect=127.0.0.1:<port>:
 * force a full GC and read process.memoryUsage() from inside, so that "does the heap grow with
 * N" is answered from live objects, not from RSS (which V8 grows lazily between collections).
 */
import { sleep } from './procs.ts';

export interface Inspector {
  /** Full GC, then process.memoryUsage() of the inspected process. */
  memoryAfterGc(): Promise<NodeJS.MemoryUsage>;
  /** A CPU profile (V8 .cpuprofile JSON) of the inspected process while `run` runs. */
  profile(run: () => Promise<void>, samplingIntervalUs?: number): Promise<object>;
  close(): void;
}

export async function connectInspector(port: number): Promise<Inspector> {
  let target: string | undefined;
  const deadline = Date.now() + 10_000;
  while (target === undefined) {
    try {
      const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{ webSocketDebuggerUrl?: string }>;
      target = list[0]?.webSocketDebuggerUrl;
    } catch {
      // not up yet
    }
    if (target === undefined) {
      if (Date.now() > deadline) throw new Error(`no inspector on port ${port}`);
      await sleep(50);
    }
  }
  const ws = new WebSocket(target);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve(), { once: true });
    ws.addEventListener('error', () => reject(new Error('inspector websocket failed')), { once: true });
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  ws.addEventListener('message', (message) => {
    const reply = JSON.parse(String(message.data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (reply.id === undefined) return;
    const waiter = pending.get(reply.id);
    pending.delete(reply.id);
    if (reply.error !== undefined) waiter?.reject(new Error(reply.error.message));
    else waiter?.resolve(reply.result);
  });
  const call = (method: string, params: object = {}): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method, params }));
      setTimeout(() => {
        if (pending.delete(id)) reject(new Error(`inspector: ${method} timed out`));
      }, 30_000).unref();
    });
  return {
    async memoryAfterGc() {
      await call('HeapProfiler.collectGarbage');
      const result = (await call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true })) as {
        result: { value: string };
      };
      return JSON.parse(result.result.value) as NodeJS.MemoryUsage;
    },
    async profile(run, samplingIntervalUs = 250) {
      await call('Profiler.enable');
      await call('Profiler.setSamplingInterval', { interval: samplingIntervalUs });
      await call('Profiler.start');
      let failed: unknown;
      await run().catch((error: unknown) => {
        failed = error;
      });
      const result = (await call('Profiler.stop')) as { profile: object };
      await call('Profiler.disable');
      if (failed !== undefined) throw failed;
      return result.profile;
    },
    close: () => ws.close(),
  };
}
