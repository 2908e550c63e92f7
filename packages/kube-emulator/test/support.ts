/**
 * The emulator exercised only through real HTTP: one emulator per test file (started and stopped by
 * the hooks below), the real @kubernetes/client-node CoreV1Api, plain fetch for raw protocol details,
 * and a fresh namespace per test.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, expect } from 'vitest';
import { type KubeEmulator, startEmulator } from '../index.ts';

export const run = promisify(execFile);
export const KUBECTL = '/usr/bin/kubectl';

export let emu: KubeEmulator;
export let api: k8s.CoreV1Api;
export let nsCounter = 0;

/** A fresh namespace per test keeps tests independent in the shared emulator. */
export function ns(): string {
  nsCounter += 1;
  return `t${nsCounter}`;
}

export interface StatusBody {
  kind: string;
  apiVersion: string;
  status: string;
  message: string;
  reason: string;
  code: number;
  details?: {
    name?: string;
    kind?: string;
    causes?: Array<{ reason: string; message: string; field: string }>;
    retryAfterSeconds?: number;
  };
}

/** client-node 2.x throws ApiException with the HTTP code and the Status JSON as a string body. */
export async function apiError(p: Promise<unknown>): Promise<{ code: number; status: StatusBody; headers: Record<string, string> }> {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof k8s.ApiException)) throw e;
    const err = e as k8s.ApiException<unknown>;
    expect(typeof err.body).toBe('string');
    return { code: err.code, status: JSON.parse(String(err.body)) as StatusBody, headers: err.headers };
  }
  throw new Error('expected the call to fail');
}

export const svcBody = (name: string, extra: Partial<k8s.V1ServiceSpec> = {}, meta: Partial<k8s.V1ObjectMeta> = {}): k8s.V1Service => ({
  metadata: { name, ...meta },
  spec: { selector: { app: name }, ports: [{ name: 'bm', port: 7079 }], ...extra },
});

export const podBody = (name: string, meta: Partial<k8s.V1ObjectMeta> = {}): k8s.V1Pod => ({
  metadata: { name, ...meta },
  spec: { containers: [{ name: 'main', image: 'spark:3.5.1' }] },
});

export function seedPod(
  namespace: string,
  name: string,
  meta: Record<string, unknown> = {},
  status: Record<string, unknown> = {},
): k8s.V1Pod {
  return emu.seed({
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: { name, namespace, ...meta },
    spec: { containers: [{ name: 'main', image: 'spark:3.5.1' }] },
    status,
  }) as k8s.V1Pod;
}

export const ownerRef = (pod: k8s.V1Pod): k8s.V1OwnerReference => ({
  apiVersion: 'v1',
  kind: 'Pod',
  name: pod.metadata?.name ?? '',
  uid: pod.metadata?.uid ?? '',
  controller: true,
  blockOwnerDeletion: true,
});

/** Middleware that aborts a client-node request after `ms` (client-node has no timeout option). */
export function timeoutOptions(ms: number): k8s.ConfigurationOptions {
  const mw: k8s.ObservableMiddleware = {
    pre: (ctx) => {
      ctx.setSignal(AbortSignal.timeout(ms));
      return new k8s.Observable(Promise.resolve(ctx));
    },
    post: (res) => new k8s.Observable(Promise.resolve(res)),
  };
  return { middleware: [mw], middlewareMergeStrategy: 'append' };
}

beforeAll(async () => {
  emu = await startEmulator();
  api = emu.kubeConfig().makeApiClient(k8s.CoreV1Api);
});

afterAll(async () => {
  await emu.stop();
});
