import { afterEach, describe, expect, it } from 'vitest';
import { CoreV1KubeClient } from '../../shared/kube/client.ts';
import { KubeApiError } from '../../shared/kube/errors.ts';
import { desiredExecutorService } from '../../shared/model/service-spec.ts';
import { type KubeEmulator, startEmulator } from '../../packages/kube-emulator/index.ts';

const NS = 'spark';
let emulator: KubeEmulator | undefined;
afterEach(async () => {
  await emulator?.stop();
  emulator = undefined;
});

const body = (execId: string) =>
  desiredExecutorService(
    NS,
    { appId: 'spark-app', execId, executor: { name: `e-${execId}`, uid: `e-uid-${execId}` }, owner: { name: 'd', uid: 'd-uid' } },
    7079,
  );

/** The wrapper's contract, through the real client-node against the emulator. */
describe('CoreV1KubeClient', () => {
  it('maps 404 to undefined, AlreadyExists to "exists", and deletes only the Service with the given UID', async () => {
    emulator = await startEmulator();
    emulator.seed({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'd', namespace: NS, uid: 'd-uid' },
      spec: { containers: [{ name: 'c', image: 'i' }] },
    });
    const client = new CoreV1KubeClient(emulator.kubeConfig(), 2000);
    expect(await client.readPod(NS, 'missing')).toBeUndefined();
    expect(await client.readService(NS, 'missing')).toBeUndefined();
    const created = await client.createService(body('1'));
    expect(created.outcome).toBe('created');
    expect(await client.createService(body('1'))).toEqual({ outcome: 'exists' });
    const stored = await client.readService(NS, body('1').metadata.name);
    expect(stored?.metadata.uid).toBeDefined();
    expect(await client.deleteService(NS, body('1').metadata.name, 'some-other-uid')).toBe('precondition-failed');
    expect(await client.deleteService(NS, body('1').metadata.name, stored!.metadata.uid!)).toBe('deleted');
    expect(await client.deleteService(NS, body('1').metadata.name, stored!.metadata.uid!)).toBe('not-found');
    expect(await client.patchService(NS, 'missing', { metadata: { labels: { a: 'b' } } })).toBe('not-found');
  });

  it('pages lists with limit and continue', async () => {
    emulator = await startEmulator();
    emulator.seed({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'd', namespace: NS, uid: 'd-uid' },
      spec: { containers: [{ name: 'c', image: 'i' }] },
    });
    const client = new CoreV1KubeClient(emulator.kubeConfig(), 2000);
    for (const id of ['1', '2', '3', '4', '5']) await client.createService(body(id));
    const names: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await client.listServices(NS, 'app.kubernetes.io/managed-by=spark-exec-svc', 2, token);
      names.push(...page.items.map((s) => s.metadata.name));
      token = page.continueToken;
      pages++;
    } while (token !== undefined);
    expect(pages).toBe(3);
    expect(names.sort()).toEqual(['1', '2', '3', '4', '5'].map((id) => body(id).metadata.name).sort());
  });

  it('classifies failures: retryable 429 with Retry-After and 5xx, final 422, timeouts and resets', async () => {
    emulator = await startEmulator();
    const client = new CoreV1KubeClient(emulator.kubeConfig(), 300);
    const failure = async (): Promise<KubeApiError> => {
      try {
        await client.readService(NS, 'x');
      } catch (error) {
        if (error instanceof KubeApiError) return error;
        throw error;
      }
      throw new Error('expected a failure');
    };
    emulator.faults.add({ resource: 'services', fault: { kind: 'status', code: 429, retryAfterSeconds: 2 } });
    expect(await failure()).toMatchObject({ status: 429, retryable: true, retryAfterMs: 2000 });
    emulator.faults.add({ resource: 'services', fault: { kind: 'status', code: 503 } });
    expect(await failure()).toMatchObject({ status: 503, retryable: true });
    emulator.faults.add({ resource: 'services', fault: { kind: 'status', code: 422 } });
    expect(await failure()).toMatchObject({ status: 422, retryable: false });
    emulator.faults.add({ resource: 'services', fault: { kind: 'hang' } });
    expect(await failure()).toMatchObject({ status: 0, reason: 'Timeout', retryable: true });
    emulator.faults.add({ resource: 'services', fault: { kind: 'reset' } });
    expect(await failure()).toMatchObject({ status: 0, retryable: true });
  });
});
