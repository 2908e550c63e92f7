/**
 * The emulator's TokenReview (tokenreview.ts) through the real @kubernetes/client-node, against
 * what a v1.32 API server answers for ServiceAccount tokens.
 */
import * as k8s from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { type KubeEmulator, startEmulator } from '../index.ts';

let emu: KubeEmulator | undefined;
afterEach(async () => {
  await emu?.stop();
  emu = undefined;
});

describe('TokenReview', () => {
  it('authenticates a minted token for an audience it carries, with the ServiceAccount user and groups', async () => {
    emu = await startEmulator();
    const api = emu.kubeConfig().makeApiClient(k8s.AuthenticationV1Api);
    const token = emu.tokens.mint({ namespace: 'spark', serviceAccount: 'src', audiences: ['aud-a', 'aud-b'] });
    const review = await api.createTokenReview({ body: { spec: { token, audiences: ['aud-b', 'aud-c'] } } });
    expect(review.kind).toBe('TokenReview');
    expect(review.status?.authenticated).toBe(true);
    expect(review.status?.user?.username).toBe('system:serviceaccount:spark:src');
    expect(review.status?.user?.groups).toEqual(['system:serviceaccounts', 'system:serviceaccounts:spark', 'system:authenticated']);
    expect(review.status?.audiences).toEqual(['aud-b']);
    expect(emu.countRequests({ verb: 'create', resource: 'tokenreviews' })).toBe(1);
  });

  it("refuses another audience (and the API server's own when none is asked), expiry, a bad signature, a deleted ServiceAccount", async () => {
    emu = await startEmulator();
    const api = emu.kubeConfig().makeApiClient(k8s.AuthenticationV1Api);
    const review = async (token: string, audiences?: string[]) =>
      (await api.createTokenReview({ body: { spec: { token, ...(audiences === undefined ? {} : { audiences }) } } })).status;
    const token = emu.tokens.mint({ namespace: 'spark', serviceAccount: 'src', audiences: ['aud-a'] });
    expect(await review(token, ['aud-x'])).toMatchObject({ error: expect.stringMatching(/invalid for the target audiences/) });
    expect((await review(token))?.authenticated).toBeUndefined();
    expect(
      (
        await review(
          emu.tokens.mint({ namespace: 'spark', serviceAccount: 'k', audiences: ['https://kubernetes.default.svc.cluster.local'] }),
        )
      )?.authenticated,
    ).toBe(true);
    expect(
      await review(emu.tokens.mint({ namespace: 'spark', serviceAccount: 'src', audiences: ['aud-a'], expiresInSeconds: -1 }), ['aud-a']),
    ).toMatchObject({ error: expect.stringMatching(/expired/) });
    const [h, p] = token.split('.');
    expect(await review(`${h}.${p}.AAAA`, ['aud-a'])).toMatchObject({ error: expect.stringMatching(/invalid bearer token/) });
    expect(await review('opaque', ['aud-a'])).toMatchObject({ error: expect.stringMatching(/invalid bearer token/) });
    emu.tokens.deleteServiceAccount('spark', 'src');
    expect(await review(token, ['aud-a'])).toMatchObject({ error: expect.stringMatching(/has been deleted/) });
    // A ServiceAccount made again under the same name has a new uid: the old token stays refused.
    emu.tokens.mint({ namespace: 'spark', serviceAccount: 'src', audiences: ['aud-a'] });
    expect((await review(token, ['aud-a']))?.authenticated).toBeUndefined();
  });

  it('a review without a token is 422; faults apply like to any request', async () => {
    emu = await startEmulator();
    const api = emu.kubeConfig().makeApiClient(k8s.AuthenticationV1Api);
    await expect(api.createTokenReview({ body: { spec: {} as k8s.V1TokenReviewSpec } })).rejects.toMatchObject({ code: 422 });
    emu.faults.add({ resource: 'tokenreviews', fault: { kind: 'status', code: 503 } });
    await expect(api.createTokenReview({ body: { spec: { token: 'x' } } })).rejects.toMatchObject({ code: 503 });
  });
});
