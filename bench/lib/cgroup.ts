/**
 * The container's limits for a process of the bench: a cgroup with the CPU quota and memory limit
 * of the manifest (knative/base/service.yaml, `resources.limits`), made for one run and removed at
 * its end. What the kubelet makes of `limits.cpu` is a CFS bandwidth quota (cpu.max on cgroup v2,
 * cpu.cfs_quota_us / cpu.cfs_period_us on v1: quota = cpu × period, period 100 ms — kubelet
 * pkg/kubelet/cm MilliCPUToQuota), and of `limits.memory` memory.max (v1: memory.limit_in_bytes).
 *
 * Which cgroup: v2 when /sys/fs/cgroup is a cgroup2 mount whose root offers the cpu and memory
 * controllers; else v1 when its cpu and memory hierarchies are writable (the same CFS quota, so
 * the same throttling as a v1 node); else none, and the caller labels its "constrained" figures as
 * an approximation (taskset to one CPU), or leaves them out. The memory cgroup is made under this
 * process's own memory cgroup so that whatever limit it runs under still applies.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { REPO_ROOT, sleep } from './procs.ts';

/** The container's limits as the manifest sets them. */
export interface ManifestLimits {
  /** CPUs (limits.cpu; "500m" = 0.5). */
  readonly cpu: number;
  readonly cpuText: string;
  /** Bytes (limits.memory). */
  readonly memoryBytes: number;
  readonly memoryText: string;
}

/** A Kubernetes resource quantity (apimachinery resource.Quantity: decimal and binary suffixes, "m"). */
export function parseQuantity(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(text.trim());
  if (m === null) throw new Error(`not a quantity this bench reads: ${JSON.stringify(text)}`);
  const scale: Record<string, number> = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
  return Number(m[1]) * (m[2] === undefined ? 1 : scale[m[2]]!);
}

/** resources.limits of the function's container in knative/base/service.yaml. */
export function manifestLimits(): ManifestLimits {
  const text = readFileSync(join(REPO_ROOT, 'knative', 'base', 'service.yaml'), 'utf8');
  const manifest = k8s.loadYaml<{
    spec: { template: { spec: { containers: Array<{ resources?: { limits?: { cpu?: string | number; memory?: string } } }> } } };
  }>(text);
  const limits = manifest.spec.template.spec.containers[0]?.resources?.limits;
  if (limits?.cpu === undefined || limits.memory === undefined)
    throw new Error('knative/base/service.yaml sets no limits.cpu / limits.memory');
  const cpuText = String(limits.cpu);
  return { cpu: parseQuantity(cpuText), cpuText, memoryBytes: parseQuantity(limits.memory), memoryText: limits.memory };
}

export type CgroupKind = 'v2' | 'v1' | 'none';

/** A process launcher: the command and arguments that start `command args…` inside the limits. */
export type Launch = (command: string, args: readonly string[]) => { command: string; args: string[] };

export interface LimitsCgroup {
  readonly kind: CgroupKind;
  /** What the figures run under, for the tables. */
  readonly label: string;
  /** Wraps a command so that it starts inside the cgroup (a shell writes its pid, then execs). */
  readonly launch: Launch;
  /** Throttling so far (cpu.stat: periods, throttled periods, throttled µs). */
  throttled(): { periods: number; throttledPeriods: number; throttledMs: number } | undefined;
  /** Peak memory use so far (v2 memory.peak, v1 memory.max_usage_in_bytes), bytes. */
  peakMemoryBytes(): number | undefined;
  /** Removes the cgroup(s); the processes in them must have exited. */
  remove(): Promise<void>;
}

const CFS_PERIOD_US = 100_000;
const CGROUP2_SUPER_MAGIC = 0x63677270;

function writable(dir: string): boolean {
  try {
    const probe = join(dir, `spark-exec-svc-probe-${process.pid}`);
    mkdirSync(probe);
    rmdirSync(probe);
    return true;
  } catch {
    return false;
  }
}

function ownV1Path(controller: string): string {
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const [, controllers, path] = line.split(':');
    if (controllers?.split(',').includes(controller)) return path ?? '/';
  }
  return '/';
}

/** Which cgroup this machine lets the bench make, and why not when it does not. */
export function cgroupSupport(): { kind: CgroupKind; why: string } {
  const root = '/sys/fs/cgroup';
  try {
    if (statfsSync(root).type === CGROUP2_SUPER_MAGIC) {
      const controllers = readFileSync(join(root, 'cgroup.controllers'), 'utf8').split(/\s+/);
      if (controllers.includes('cpu') && controllers.includes('memory') && writable(root)) return { kind: 'v2', why: 'cgroup v2' };
      return { kind: 'none', why: `cgroup v2 at ${root} without cpu+memory controllers or not writable` };
    }
  } catch {
    // not a cgroup2 mount
  }
  const cpu = join(root, 'cpu');
  const memory = join(root, 'memory', ownV1Path('memory'));
  if (existsSync(join(cpu, 'cpu.cfs_quota_us')) && existsSync(join(memory, 'memory.limit_in_bytes')) && writable(cpu) && writable(memory))
    return {
      kind: 'v1',
      why: `${root} is cgroup v1 (hybrid; its cgroup2 mount has no controllers): the v1 cpu and memory hierarchies, the same CFS quota a v1 node's kubelet sets`,
    };
  return { kind: 'none', why: `no writable cgroup v2 nor v1 cpu+memory hierarchy under ${root}` };
}

/** Makes the cgroup for `limits`; kind 'none' launches under `taskset -c 0` (one whole CPU: an approximation, labelled so). */
export async function makeLimitsCgroup(limits: ManifestLimits, name = `spark-exec-svc-bench-${process.pid}`): Promise<LimitsCgroup> {
  const support = cgroupSupport();
  if (support.kind === 'none') return approximation(limits, support.why);
  try {
    return makeCgroup(limits, name, support.kind);
  } catch (error) {
    // e.g. a cgroup v2 root that does not hand cpu or memory down (cgroup.subtree_control): whatever was made goes.
    for (const dir of [
      join('/sys/fs/cgroup', name),
      join('/sys/fs/cgroup/cpu', name),
      join('/sys/fs/cgroup/memory', ownV1Path('memory'), name),
    ]) {
      try {
        if (existsSync(dir)) rmdirSync(dir);
      } catch {
        // not ours to keep trying
      }
    }
    return approximation(limits, `${support.kind}: could not set the limits: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function makeCgroup(limits: ManifestLimits, name: string, kind: 'v1' | 'v2'): LimitsCgroup {
  const quotaUs = Math.round(limits.cpu * CFS_PERIOD_US);
  const shell = (procs: readonly string[]): Launch => {
    const writes = procs.map((_file, i) => `echo $$ > "$${i + 1}"`).join(' && ');
    return (command, args) => ({
      command: '/bin/sh',
      // sh -c SCRIPT $0 $1…: the cgroup files are $1…$k, the command follows them.
      args: ['-c', `${writes} && shift ${procs.length} && exec "$@"`, 'sh', ...procs, command, ...args],
    });
  };
  if (kind === 'v2') {
    const dir = join('/sys/fs/cgroup', name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'cpu.max'), `${quotaUs} ${CFS_PERIOD_US}`);
    writeFileSync(join(dir, 'memory.max'), String(limits.memoryBytes));
    return {
      kind: 'v2',
      label: `cgroup v2: cpu.max ${quotaUs} ${CFS_PERIOD_US}, memory.max ${limits.memoryText}`,
      launch: shell([join(dir, 'cgroup.procs')]),
      throttled: () => cpuStat(join(dir, 'cpu.stat'), 'nr_periods', 'nr_throttled', 'throttled_usec', 1000),
      peakMemoryBytes: () => readNumber(join(dir, 'memory.peak')),
      remove: () => removeDirs([dir]),
    };
  }
  const cpuDir = join('/sys/fs/cgroup/cpu', name);
  const memDir = join('/sys/fs/cgroup/memory', ownV1Path('memory'), name);
  mkdirSync(cpuDir);
  mkdirSync(memDir);
  writeFileSync(join(cpuDir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
  writeFileSync(join(cpuDir, 'cpu.cfs_quota_us'), String(quotaUs));
  writeFileSync(join(memDir, 'memory.limit_in_bytes'), String(limits.memoryBytes));
  return {
    kind: 'v1',
    label: `cgroup v1: cpu.cfs_quota_us ${quotaUs} / cfs_period_us ${CFS_PERIOD_US}, memory.limit_in_bytes ${limits.memoryText}`,
    launch: shell([join(cpuDir, 'cgroup.procs'), join(memDir, 'cgroup.procs')]),
    throttled: () => cpuStat(join(cpuDir, 'cpu.stat'), 'nr_periods', 'nr_throttled', 'throttled_time', 1e6),
    peakMemoryBytes: () => readNumber(join(memDir, 'memory.max_usage_in_bytes')),
    remove: () => removeDirs([cpuDir, memDir]),
  };
}

/** No cgroup to be had: `taskset -c 0` (one whole CPU), labelled an approximation. */
function approximation(limits: ManifestLimits, why: string): LimitsCgroup {
  const taskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  return {
    kind: 'none',
    label: taskset
      ? `APPROXIMATION (${why}): taskset -c 0, one whole CPU instead of ${limits.cpuText}, no memory limit`
      : `NOT CONSTRAINED (${why}; no taskset either): the same as unconstrained`,
    launch: taskset
      ? (command, args) => ({ command: 'taskset', args: ['-c', '0', command, ...args] })
      : (command, args) => ({ command, args: [...args] }),
    throttled: () => undefined,
    peakMemoryBytes: () => undefined,
    remove: async () => {},
  };
}

function readNumber(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8').trim());
  } catch {
    return undefined;
  }
}

function cpuStat(file: string, periods: string, throttled: string, time: string, perMs: number) {
  try {
    const fields = new Map(
      readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' ') as [string, string]),
    );
    return {
      periods: Number(fields.get(periods) ?? 0),
      throttledPeriods: Number(fields.get(throttled) ?? 0),
      throttledMs: Math.round(Number(fields.get(time) ?? 0) / perMs),
    };
  } catch {
    return undefined;
  }
}

/** rmdir of each cgroup, retried while its last process is still being reaped. */
async function removeDirs(dirs: readonly string[]): Promise<void> {
  for (const dir of dirs) {
    for (let attempt = 0; ; attempt++) {
      try {
        if (existsSync(dir)) rmdirSync(dir);
        break;
      } catch (error) {
        if (attempt >= 50) throw new Error(`could not remove cgroup ${dir}: ${error instanceof Error ? error.message : String(error)}`);
        await sleep(100);
      }
    }
  }
}
