/**
 * The real ApiServerSource receive adapter (knative.dev/eventing cmd/apiserver_receive_adapter),
 * run as its Deployment's container would run: the env the reconciler generates for our
 * ApiServerSource (render.ts), its ServiceAccount's token at the in-cluster path, and
 * KUBERNETES_SERVICE_HOST/PORT (client-go's rest.InClusterConfig, which
 * injection.ParseAndGetRESTConfigOrDie falls back to without --kubeconfig).
 *
 * The adapter serves its health probes on :8080 of every interface and ignores a failure to bind
 * (knative.dev/pkg injection/health_check.go); readiness here is its own log line instead.
 */
import { type PodProcess, type ServiceAccountFiles, startPodProcess } from '../function/pod-process.ts';
import { envRecord, type Rendered } from './render.ts';

export interface RunningAdapter {
  readonly process: PodProcess;
  readonly env: Readonly<Record<string, string>>;
}

export interface StartAdapterOptions {
  readonly binary: string;
  readonly rendered: Rendered;
  readonly serviceAccount: ServiceAccountFiles;
  readonly apiServer: { readonly host: string; readonly port: number };
  readonly netnsPath?: string;
  readonly logFile?: string;
}

export async function startAdapter(options: StartAdapterOptions): Promise<RunningAdapter> {
  const env = envRecord(options.rendered.adapter.env);
  if (options.serviceAccount.namespace !== options.rendered.adapter.sourceNamespace) {
    throw new Error(`the adapter runs in ${options.rendered.adapter.sourceNamespace}, not ${options.serviceAccount.namespace}`);
  }
  const proc = startPodProcess({
    name: 'adapter',
    command: options.binary,
    args: [],
    env,
    serviceAccount: options.serviceAccount,
    apiServer: options.apiServer,
    ...(options.netnsPath === undefined ? {} : { netnsPath: options.netnsPath }),
    ...(options.logFile === undefined ? {} : { logFile: options.logFile }),
  });
  // Logged by pkg/adapter/apiserver/adapter.go just before its reflectors start.
  await proc.waitForLine(/Starting in (resilient|fail-fast) mode/, 30_000);
  return { process: proc, env };
}
