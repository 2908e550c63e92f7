import type { Pod, Service } from '../k8s-objects.ts';
import { listAll } from '../kube/paging.ts';
import { EXECUTOR_GONE_AT_ANNOTATION, SPARK_ROLE_DRIVER, SPARK_ROLE_EXECUTOR, SPARK_ROLE_LABEL } from '../labels.ts';
import { executorServiceName } from '../naming.ts';
import { OUR_SERVICES_SELECTOR } from '../service-spec.ts';
import { planSweep } from '../sweep-plan.ts';
import type { EventResult, ReconcileContext, ServiceOutcome } from './context.ts';
import { deleteOurs } from './delete.ts';
import { ensuredKey } from './ensured-cache.ts';
import { ensureExecutorService } from './executor.ts';

/**
 * The periodic safety net (a PingSource event): events lost while nothing ran, and the clock
 * that ends cooled-down Services. Reads each watched namespace in pages, then repairs.
 */
export async function sweep(ctx: ReconcileContext): Promise<EventResult> {
  const outcomes: ServiceOutcome[] = [];
  let examined = 0;
  for (const namespace of ctx.config.namespaces) {
    const limit = ctx.config.sweepPageSize;
    const [executors, drivers, services] = [
      await listAll<Pod>((token) => ctx.client.listPods(namespace, `${SPARK_ROLE_LABEL}=${SPARK_ROLE_EXECUTOR}`, limit, token)),
      await listAll<Pod>((token) => ctx.client.listPods(namespace, `${SPARK_ROLE_LABEL}=${SPARK_ROLE_DRIVER}`, limit, token)),
      await listAll<Service>((token) => ctx.client.listServices(namespace, OUR_SERVICES_SELECTOR, limit, token)),
    ];
    examined += services.length;
    for (const step of planSweep({ executors, drivers, services }, ctx.config, ctx.now())) {
      if (step.kind === 'ensure') {
        // The plan saw the Service missing or drifted: whatever this process cached about it is stale.
        ctx.ensuredCache?.forget(ensuredKey(namespace, executorServiceName(step.executor.appId, step.executor.execId)));
        const result = await ensureExecutorService(ctx, step.executor);
        outcomes.push(...result.outcomes.map((o) => ({ ...o, detail: [step.why, o.detail].filter(Boolean).join('; ') })));
      } else if (step.kind === 'delete') {
        outcomes.push(await deleteOurs(ctx, step.service, step.why));
      } else {
        const { name } = step.service.metadata;
        const patched = await ctx.client.patchService(namespace, name, {
          metadata: { annotations: { [EXECUTOR_GONE_AT_ANNOTATION]: ctx.now().toISOString() } },
        });
        if (patched !== undefined) outcomes.push({ namespace, service: name, action: 'marked-gone', detail: 'executor pod missing; cool-down started' });
      }
    }
  }
  const changed = outcomes.filter((o) => o.action !== 'verified');
  return { action: 'swept', reason: `${examined} Services examined, ${changed.length} repaired`, outcomes: changed };
}
