// The executor wrapper (spark/executor-entrypoint.sh) and its java shim (spark/java-shim.sh),
// run the way the pod template runs them (test/executor/executor-wrapper.ts: scripts laid out as the
// ConfigMap volume mounts them, a fake Spark entrypoint that starts ${JAVA_HOME}/bin/java with the
// executor backend's args exactly like Spark's entrypoint.sh does, a fake `java` that prints what it
// got) with a fake `getent` whose answers the test controls. Also: the block-manager port must be
// exactly the Service's (-Dspark.port.maxRetries=0, a port already taken in the pod, several
// values), the external shuffle service, the DNS wait's bound with a look-up that never returns,
// the pod template, and that `kubectl kustomize spark/` builds the ConfigMap offline.
// The same bound against a real resolver and a DNS server that never answers:
// test/executor/dns-netns.test.ts.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadAllYaml, loadYaml } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { findBinary, isRoot } from '../../proof/fast-fail/sys.ts';
import { executorServiceName } from '../../shared/model/naming.ts';
import { requireKubectl, skipWithoutKubectl } from '../../testkit/kubectl.ts';
import {
  APP,
  argAfter,
  BACKEND,
  childPids,
  executorEnv,
  makeExecutorLayout,
  pathWith,
  POD_IP,
  processesWithEnv,
  type Result,
  runScript,
  SPARK_DIR,
  writeExecutable,
} from './executor-wrapper.ts';

const layout = makeExecutorLayout('exec-svc-entrypoint-');
const { root, home, jdk } = layout;
const fakeBin = join(root, 'bin'); // fake getent
const dnsDir = join(root, 'dns'); // a file named after a host makes it resolve
mkdirSync(fakeBin, { recursive: true });
mkdirSync(dnsDir, { recursive: true });
writeExecutable(
  join(fakeBin, 'getent'),
  `#!/bin/sh
[ -z "$FAKE_GETENT_LOG" ] || printf '%s\\n' "$$" >>"$FAKE_GETENT_LOG"
[ -n "$FAKE_DNS_HANG" ] && exec sleep "$FAKE_DNS_HANG"
[ "$1" = hosts ] && [ -e "$FAKE_DNS_DIR/$2" ] && { printf '10.96.0.42      %s\\n' "$2"; exit 0; }
exit 2
`,
);
// what the wrapper, exec-svc-name.sh and the fake entrypoint need, but no `timeout`: the wrapper's watchdog
const busyboxAvailable = spawnSync('busybox', ['true'], { stdio: 'ignore' }).status === 0;
const noTimeoutBin = pathWith(
  join(root, 'no-timeout-bin'),
  ['sh', 'env', 'sed', 'sort', 'head', 'tr', 'sha256sum', 'cut', 'cat', 'sleep', 'date', ...(busyboxAvailable ? ['busybox'] : [])],
  process.env.PATH ?? '/usr/bin:/bin',
);

// a `sleep` that refuses fractions of a second, first on PATH
const wholeSleepBin = join(root, 'whole-sleep-bin');
mkdirSync(wholeSleepBin);
writeExecutable(
  join(wholeSleepBin, 'sleep'),
  `#!/bin/sh
case $1 in *[!0-9]*) echo "sleep: invalid number '$1'" >&2; exit 1 ;; esac
exec ${findBinary('sleep') ?? '/bin/sleep'} "$1"
`,
);

afterAll(() => layout.remove());

function baseEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  return executorEnv(layout, { PATH: `${fakeBin}:${process.env.PATH ?? '/usr/bin:/bin'}`, FAKE_DNS_DIR: dnsDir, ...extra });
}

// each shell gets its own namespace, so the hosts (and the fake DNS) of concurrent tests never overlap
const shells: { name: string; cmd: string[]; ns: string }[] = [
  { name: 'sh', cmd: ['sh'], ns: 'jobs-sh' },
  ...(busyboxAvailable ? [{ name: 'busybox sh', cmd: ['busybox', 'sh'], ns: 'jobs-busybox' }] : []),
];

function runWrapper(shell: string[], args: string[], env: NodeJS.ProcessEnv): Promise<Result> {
  const [cmd, ...pre] = shell;
  if (cmd === undefined) throw new Error('empty shell');
  return runScript(cmd, [...pre, join(home, 'executor-entrypoint.sh'), ...args], env);
}

function resolvable(host: string): void {
  writeFileSync(join(dnsDir, host), '');
}

describe.concurrent.each(shells)('executor-entrypoint.sh under $name', ({ cmd, ns }) => {
  const env = (extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv => baseEnv({ SPARK_EXECUTOR_NAMESPACE: ns, ...extra });

  it('passes the driver through untouched', async () => {
    const r = await runWrapper(cmd, ['driver', '--class', 'Main', 'app.jar'], env());
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`ENTRYPOINT driver --class Main app.jar\nDRIVER JAVA_HOME=${jdk}\n`);
    expect(r.stderr).toBe('');
  });

  it('passes any other command through untouched', async () => {
    const r = await runWrapper(cmd, ['echo', 'hello', 'world'], env());
    expect(r.stdout).toBe('ENTRYPOINT echo hello world\nhello world\n');
    expect(r.stderr).toBe('');
  });

  it('advertises <service>.<namespace>.svc and binds the pod IP once the name resolves', async () => {
    const host = `${executorServiceName(APP, '7')}.${ns}.svc`;
    resolvable(host);
    const r = await runWrapper(cmd, ['executor'], env());
    expect(r.code).toBe(0);
    expect(argAfter(r.args, '--hostname')).toBe(host);
    expect(argAfter(r.args, '--bind-address')).toBe(POD_IP);
    expect(r.args.filter((a) => a === '--hostname')).toHaveLength(1);
    // the JVM options as Spark's entrypoint passes them, then -Dspark.port.maxRetries=0 right
    // before the class name, where it is the last -D and so the value the JVM keeps
    expect(r.args.slice(0, 5)).toEqual(['-Dspark.driver.port=7078', '-Dspark.blockManager.port=7079', '-Xms1g', '-Xmx1g', '-cp']);
    expect(r.args[r.args.indexOf(BACKEND) - 1]).toBe('-Dspark.port.maxRetries=0');
    expect(r.args.filter((a) => a.startsWith('-Dspark.port.maxRetries'))).toEqual(['-Dspark.port.maxRetries=0']);
    expect(argAfter(r.args, '--podName')).toBe('app-exec-7');
    expect(r.javaHome).toBe(jdk); // the JVM sees the real JAVA_HOME again
    expect(r.stderr).toContain(`${host} resolves`);
  });

  it('uses the hashed name for ids that are no DNS label', async () => {
    const app = 'My_Spark.App';
    const host = `${executorServiceName(app, '12')}.${ns}-a.svc`;
    expect(host).toMatch(/^svc-my-spark-app-exec-12-h[0-9a-f]{10}\.[a-z-]+\.svc$/);
    resolvable(host);
    const r = await runWrapper(
      cmd,
      ['executor'],
      env({ SPARK_APPLICATION_ID: app, SPARK_EXECUTOR_ID: '12', SPARK_EXECUTOR_NAMESPACE: `${ns}-a` }),
    );
    expect(argAfter(r.args, '--hostname')).toBe(host);
    expect(argAfter(r.args, '--bind-address')).toBe(POD_IP);
  });

  it('waits until the Service name resolves', async () => {
    const host = `${executorServiceName(APP, '8')}.${ns}.svc`;
    const timer = setTimeout(() => resolvable(host), 1200);
    const r = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '8', SPARK_EXEC_SVC_WAIT_SECONDS: '10' }));
    clearTimeout(timer);
    expect(r.ms).toBeGreaterThanOrEqual(1000);
    expect(r.ms).toBeLessThan(8000);
    expect(argAfter(r.args, '--hostname')).toBe(host);
    expect(argAfter(r.args, '--bind-address')).toBe(POD_IP);
  }, 15_000);

  it('falls back to the pod IP when the name does not resolve in time', async () => {
    const r = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '9', SPARK_EXEC_SVC_WAIT_SECONDS: '1' }));
    expect(r.code).toBe(0);
    expect(r.ms).toBeGreaterThanOrEqual(1000);
    expect(r.ms).toBeLessThan(5000);
    expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
    expect(r.args).not.toContain('--bind-address');
    expect(r.javaHome).toBe(jdk);
    expect(r.stderr).toContain('does not resolve');
  }, 15_000);

  it('fails or advertises anyway on timeout when told to', async () => {
    const fail = await runWrapper(
      cmd,
      ['executor'],
      env({ SPARK_EXECUTOR_ID: '10', SPARK_EXEC_SVC_WAIT_SECONDS: '1', SPARK_EXEC_SVC_ON_TIMEOUT: 'fail' }),
    );
    expect(fail.code).toBe(1);
    expect(fail.stdout).toBe('');
    const anyway = await runWrapper(
      cmd,
      ['executor'],
      env({ SPARK_EXECUTOR_ID: '10', SPARK_EXEC_SVC_WAIT_SECONDS: '1', SPARK_EXEC_SVC_ON_TIMEOUT: 'advertise' }),
    );
    expect(argAfter(anyway.args, '--hostname')).toBe(`${executorServiceName(APP, '10')}.${ns}.svc`);
    expect(argAfter(anyway.args, '--bind-address')).toBe(POD_IP);
  }, 15_000);

  it('does not wait with SPARK_EXEC_SVC_WAIT_SECONDS=0 and honours a bind-address override', async () => {
    const r = await runWrapper(
      cmd,
      ['executor'],
      env({ SPARK_EXECUTOR_ID: '11', SPARK_EXEC_SVC_WAIT_SECONDS: '0', SPARK_EXEC_SVC_BIND_ADDRESS: '0.0.0.0' }),
    );
    expect(r.ms).toBeLessThan(3000);
    expect(argAfter(r.args, '--hostname')).toBe(`${executorServiceName(APP, '11')}.${ns}.svc`);
    expect(argAfter(r.args, '--bind-address')).toBe('0.0.0.0');
  });

  it('advertises the name only for a fixed spark.blockManager.port that agrees with the annotation', async () => {
    const host = `${executorServiceName(APP, '13')}.${ns}.svc`;
    resolvable(host);
    const ok = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '13', SPARK_EXEC_SVC_PORT_ANNOTATION: '7079' }));
    expect(argAfter(ok.args, '--hostname')).toBe(host);
    expect(ok.stderr).toContain(`advertising ${host}:7079`);
    for (const extra of [
      { SPARK_JAVA_OPT_1: undefined }, // conf unset: random port, the Service cannot forward it
      { SPARK_JAVA_OPT_1: '-Dspark.blockManager.port=0' },
      { SPARK_JAVA_OPT_1: '-Dspark.blockManagerX.port=7079' },
      { SPARK_EXEC_SVC_PORT_ANNOTATION: '7100' }, // the Service would forward another port
    ]) {
      const r = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '13', ...extra }));
      expect(r.code).toBe(0);
      expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
      expect(r.args).not.toContain('--bind-address');
      expect(r.stderr).toContain('keeps advertising its pod IP');
    }
  });

  it('falls back when the pod gives spark.blockManager.port several different values', async () => {
    const host = `${executorServiceName(APP, '14')}.${ns}.svc`;
    resolvable(host);
    // Which -D the JVM keeps depends on the image: Spark's entrypoint sorts SPARK_JAVA_OPT_* by
    // number (_2 before _10, so 7100 would win), the official images expand them lexically
    // (_10 before _2, so 7079 would win). The fake entrypoint does either.
    const opts = {
      SPARK_EXECUTOR_ID: '14',
      SPARK_JAVA_OPT_1: undefined,
      SPARK_JAVA_OPT_2: '-Dspark.blockManager.port=7079',
      SPARK_JAVA_OPT_10: '-Dspark.blockManager.port=7100',
    };
    for (const order of ['numeric', 'lexical']) {
      const r = await runWrapper(cmd, ['executor'], env({ ...opts, FAKE_OPT_ORDER: order }));
      expect(r.code).toBe(0);
      expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
      expect(r.args).not.toContain('-Dspark.port.maxRetries=0');
      expect(r.stderr).toContain('several different values');
    }
    const numeric = await runWrapper(cmd, ['executor'], env({ ...opts, FAKE_OPT_ORDER: 'numeric' }));
    expect(numeric.args.filter((a) => a.startsWith('-Dspark.blockManager.port=')).at(-1)).toBe('-Dspark.blockManager.port=7100');
    const lexical = await runWrapper(cmd, ['executor'], env({ ...opts, FAKE_OPT_ORDER: 'lexical' }));
    expect(lexical.args.filter((a) => a.startsWith('-Dspark.blockManager.port=')).at(-1)).toBe('-Dspark.blockManager.port=7079');
    // the same value twice is no ambiguity
    const same = await runWrapper(cmd, ['executor'], env({ ...opts, SPARK_JAVA_OPT_10: '-Dspark.blockManager.port=7079' }));
    expect(argAfter(same.args, '--hostname')).toBe(host);
    expect(same.stderr).toContain(`advertising ${host}:7079`);
  });

  it("keeps a user spark.port.maxRetries from moving the block manager: the shim's -D comes last", async () => {
    const host = `${executorServiceName(APP, '15')}.${ns}.svc`;
    resolvable(host);
    for (const order of ['numeric', 'lexical']) {
      const r = await runWrapper(
        cmd,
        ['executor'],
        env({ SPARK_EXECUTOR_ID: '15', SPARK_JAVA_OPT_2: '-Dspark.port.maxRetries=32', FAKE_OPT_ORDER: order }),
      );
      expect(argAfter(r.args, '--hostname')).toBe(host);
      const retries = r.args.filter((a) => a.startsWith('-Dspark.port.maxRetries='));
      expect(retries).toEqual(['-Dspark.port.maxRetries=32', '-Dspark.port.maxRetries=0']);
      expect(r.args.indexOf('-Dspark.port.maxRetries=0')).toBe(r.args.indexOf(BACKEND) - 1);
    }
  });

  it('keeps the pod IP when the block-manager port is already taken in the pod', async () => {
    // Real listeners in this network namespace, found by the wrapper in /proc/net/tcp{,6}. The
    // pod IP is 127.0.0.1 here, so that a listener can sit on it.
    const held: Server[] = [];
    const listen = (host: string, port = 0): Promise<number> =>
      new Promise((resolve, reject) => {
        const srv = createServer();
        srv.once('error', reject);
        srv.listen({ host, port, ipv6Only: host === '::' ? false : undefined }, () => {
          held.push(srv);
          const a = srv.address();
          resolve(typeof a === 'object' && a !== null ? a.port : -1);
        });
      });
    try {
      const host = `${executorServiceName(APP, '16')}.${ns}.svc`;
      resolvable(host);
      const run = (port: number, extra: Record<string, string | undefined> = {}) =>
        runWrapper(
          cmd,
          ['executor'],
          env({
            SPARK_EXECUTOR_ID: '16',
            SPARK_EXECUTOR_POD_IP: '127.0.0.1',
            SPARK_JAVA_OPT_1: `-Dspark.blockManager.port=${port}`,
            ...extra,
          }),
        );
      const expectTaken = (r: Result, port: number, podIp = '127.0.0.1') => {
        expect(r.code).toBe(0);
        expect(argAfter(r.args, '--hostname')).toBe(podIp);
        expect(r.args).not.toContain('--bind-address');
        expect(r.args).not.toContain('-Dspark.port.maxRetries=0');
        expect(r.stderr).toContain(`port ${port} is already taken in this pod`);
        expect(r.stderr).toContain('keeps advertising its pod IP');
      };
      const expectFree = (r: Result) => {
        expect(argAfter(r.args, '--hostname')).toBe(host);
        expect(r.args).toContain('-Dspark.port.maxRetries=0');
      };

      // on the bind address itself
      const onPodIp = await listen('127.0.0.1');
      expectTaken(await run(onPodIp), onPodIp);
      // on the wildcard address: taken for every bind address
      const onAny = await listen('0.0.0.0');
      expectTaken(await run(onAny), onAny);
      expectTaken(await run(onAny, { SPARK_EXECUTOR_POD_IP: POD_IP }), onAny, POD_IP);
      // on another address of the pod: no conflict for the pod IP, a conflict for 0.0.0.0
      const onOther = await listen('127.0.0.2');
      expectFree(await run(onOther));
      expectTaken(await run(onOther, { SPARK_EXEC_SVC_BIND_ADDRESS: '0.0.0.0' }), onOther);
      // the IPv6 wildcard (dual-stack), when this machine has IPv6
      const onV6Any = await listen('::').catch(() => null);
      if (onV6Any !== null) expectTaken(await run(onV6Any), onV6Any);
      // a free port
      const free = await listen('127.0.0.1');
      await new Promise<void>((resolve) => held.pop()?.close(() => resolve()));
      expectFree(await run(free));
    } finally {
      await Promise.all(held.map((srv) => new Promise<void>((resolve) => srv.close(() => resolve()))));
    }
  });

  it('keeps the pod IP when an external shuffle service is used', async () => {
    const host = `${executorServiceName(APP, '17')}.${ns}.svc`;
    resolvable(host);
    for (const extra of [
      { SPARK_EXEC_SVC_SHUFFLE_SERVICE: 'true' }, // --conf spark.executorEnv.SPARK_EXEC_SVC_SHUFFLE_SERVICE=true
      { SPARK_JAVA_OPT_2: '-Dspark.shuffle.service.enabled=TRUE' },
      { SPARK_JAVA_OPT_2: '-Dspark.shuffle.service.enabled=true', SPARK_EXEC_SVC_SHUFFLE_SERVICE: 'false' },
      { SPARK_JAVA_OPT_2: '-Dspark.shuffle.service.port=7337' }, // a port conf: Spark passes it when set
    ]) {
      const r = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '17', ...extra }));
      expect(r.code).toBe(0);
      expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
      expect(r.args).not.toContain('--bind-address');
      expect(r.stderr).toContain('external shuffle service in use');
      expect(r.stderr).toContain('7337');
    }
    for (const extra of [
      { SPARK_JAVA_OPT_2: '-Dspark.shuffle.service.enabled=false' },
      { SPARK_JAVA_OPT_2: '-Dspark.shuffle.service.port=7337', SPARK_EXEC_SVC_SHUFFLE_SERVICE: 'false' },
    ]) {
      const r = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '17', ...extra }));
      expect(argAfter(r.args, '--hostname')).toBe(host);
      expect(r.stderr).not.toContain('shuffle service');
    }
  });

  // A DNS server that never answers, stood in for by a getent that never returns (the real resolver
  // in a network namespace: test/executor/dns-netns.test.ts). With `timeout` and with the watchdog.
  for (const timer of ['timeout', 'watchdog'] as const) {
    it(`bounds the DNS wait when a look-up never returns (${timer})`, async () => {
      const pathEnv = timer === 'timeout' ? {} : { PATH: `${fakeBin}:${noTimeoutBin}` };
      const r = await runWrapper(
        cmd,
        ['executor'],
        env({ SPARK_EXECUTOR_ID: '18', SPARK_EXEC_SVC_WAIT_SECONDS: '2', FAKE_DNS_HANG: '30', ...pathEnv }),
      );
      expect(r.code).toBe(0);
      expect(r.ms).toBeGreaterThanOrEqual(1900);
      expect(r.ms).toBeLessThan(3000);
      expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
      expect(r.stderr).toMatch(/does not resolve after 2\.\d\ds \(1 look-up\(s\), 1 cut off unanswered by the DNS server\)/);
    }, 15_000);
  }

  // A `sleep` that takes whole seconds only (busybox built without FEATURE_FLOAT_SLEEP): the wrapper
  // rounds its pauses and its watchdog up to whole seconds, says so, and the wait ends within 1 s late.
  it('says so, and stays within a second of the bound, when sleep takes whole seconds only', async () => {
    const r = await runWrapper(
      cmd,
      ['executor'],
      env({
        SPARK_EXECUTOR_ID: '19',
        SPARK_EXEC_SVC_WAIT_SECONDS: '2',
        SPARK_EXEC_SVC_WAIT_INTERVAL: '0.3',
        PATH: `${fakeBin}:${wholeSleepBin}:${noTimeoutBin}`,
      }),
    );
    expect(r.code).toBe(0);
    expect(r.ms).toBeGreaterThanOrEqual(1900);
    expect(r.ms).toBeLessThan(4000);
    expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
    expect(r.stderr).toContain('sleep takes whole seconds only');
    expect(r.stderr).toMatch(/does not resolve after [23]\.\d\ds/);
  }, 15_000);

  it('keeps Spark behaviour when it cannot name the Service', async () => {
    for (const extra of [
      { SPARK_EXECUTOR_NAMESPACE: undefined },
      { SPARK_EXECUTOR_ID: 'EXECID' }, // statefulset allocator: id only known inside the JVM
      { SPARK_APPLICATION_ID: '' },
      { SPARK_EXEC_SVC_DISABLE: 'true' },
      { SPARK_EXEC_SVC_JAVA_SHIM_HOME: join(root, 'no-such-dir') },
    ]) {
      const r = await runWrapper(cmd, ['executor'], env({ ...extra, SPARK_EXEC_SVC_WAIT_SECONDS: '0' }));
      expect(r.code).toBe(0);
      expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
      expect(r.args).not.toContain('--bind-address');
      expect(r.javaHome).toBe(jdk);
      expect(r.stderr).toMatch(/^spark-exec-svc: /);
    }
  });
});

// SIGTERM during the DNS wait. The kubelet stops a deleted pod's container by signalling its PID 1
// with SIGTERM, then SIGKILL after the grace period; until it execs Spark's entrypoint (which hands
// over to tini), that PID 1 is the wrapper. The kernel drops a signal sent to a PID namespace's init
// that has no handler for it (pid_namespaces(7)), so without a trap the wait went on and java started.
// The wrapper must end at once with 143 (SIGTERM) or 130 (SIGINT), kill the look-up or pause it was
// in, and never start Spark's entrypoint. Run plainly, and as PID 1 of a new PID namespace
// (`unshare --pid --fork --mount-proc`, root only), in a look-up that hangs (with `timeout`, with the
// watchdog) and in the pause between look-ups.
const SIGNAL_AT_MS = 1000; // after the first look-up, into a 6 s wait
const SIGNAL_EXIT_MS = 500; // from the signal to the wrapper's exit
// by absolute path: some runs set a PATH without it
const UNSHARE = [findBinary('unshare') ?? 'unshare', '--pid', '--fork', '--mount-proc', '--kill-child'];
const pid1Skip = ((): string => {
  if (process.platform !== 'linux') return 'not Linux';
  if (!isRoot()) return 'not root';
  if (findBinary('unshare') === null) return '`unshare` (util-linux) not found';
  const probe = spawnSync(UNSHARE[0] ?? 'unshare', [...UNSHARE.slice(1), 'true'], { encoding: 'utf8' });
  return probe.status === 0 ? '' : `cannot make a PID namespace: ${(probe.stderr ?? probe.error?.message ?? '').trim()}`;
})();
if (pid1Skip !== '') console.warn(`executor wrapper as PID 1: skipped (${pid1Skip})`);

// every shell the recipe supports that is installed, each once (sh is dash on Debian)
const signalShells = (() => {
  const seen = new Set<string>();
  const found: { name: string; cmd: string[] }[] = [];
  for (const cmd of [['sh'], ['dash'], ['bash'], ['busybox', 'sh']]) {
    const bin = findBinary(cmd[0] ?? '');
    if (bin === null) continue;
    const real = realpathSync(bin) + (cmd.length > 1 ? ' sh' : '');
    if (seen.has(real)) continue;
    seen.add(real);
    // by absolute path: the watchdog runs set a PATH without it
    found.push({ name: `${cmd.join(' ')} (${real})`, cmd: [bin, ...cmd.slice(1)] });
  }
  return found;
})();

interface SignalledRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** from the first look-up to the signal */
  sentAtMs: number;
  /** from the signal to the exit of the wrapper (of unshare, for PID 1) */
  exitAfterMs: number;
  /** the wrapper's NSpid line: its pid in each PID namespace, innermost last */
  nsPid: string;
  /** processes with this run's env mark still alive 1 s after the exit */
  leftovers: string[];
}

let signalRuns = 0;

async function signalDuringWait(
  shell: string[],
  pid1: boolean,
  signal: 'SIGTERM' | 'SIGINT',
  extra: Record<string, string | undefined>,
): Promise<SignalledRun> {
  signalRuns += 1;
  const mark = `${process.pid}-${signalRuns}`;
  const getentLog = join(root, `getent-${mark}.log`);
  const env = baseEnv({
    SPARK_EXECUTOR_NAMESPACE: 'jobs-signal',
    SPARK_EXECUTOR_ID: String(100 + signalRuns),
    SPARK_EXEC_SVC_WAIT_SECONDS: '6',
    SPARK_EXEC_SVC_TEST_MARK: mark,
    FAKE_GETENT_LOG: getentLog,
    ...extra,
  });
  const [cmd, ...pre] = pid1 ? [...UNSHARE, ...shell] : shell;
  if (cmd === undefined) throw new Error('empty shell');
  const started = performance.now();
  const child = spawn(cmd, [...pre, join(home, 'executor-entrypoint.sh'), 'executor'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, sig) => resolve({ code, signal: sig, at: performance.now() })),
  );
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let wrapperPid: number | undefined;
  try {
    if (child.pid === undefined) throw new Error(`could not start ${cmd}`);
    // SIGNAL_AT_MS after the first look-up started (the fake getent's log appeared)
    while (!existsSync(getentLog)) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the wrapper ended before its first look-up: ${stderr}`);
      if (performance.now() - started > 10_000) throw new Error(`no look-up within 10 s: ${stderr}`);
      await sleep(5);
    }
    const firstLookUp = performance.now();
    await sleep(SIGNAL_AT_MS);
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the wrapper ended before the signal: ${stderr}`);
    wrapperPid = child.pid;
    if (pid1) {
      // unshare --fork: the wrapper is unshare's only child
      const inner = childPids(child.pid);
      if (inner.length !== 1 || inner[0] === undefined) throw new Error(`unshare has children ${inner.join(', ')}`);
      wrapperPid = inner[0];
    }
    const nsPid = /^NSpid:\s*(.*)$/m.exec(readFileSync(`/proc/${wrapperPid}/status`, 'utf8'))?.[1] ?? '';
    const sentAt = performance.now();
    process.kill(wrapperPid, signal);
    const exit = await exited;
    // the output is complete once every holder of the pipes is gone; a leftover may hold them
    await Promise.race([closed, sleep(2000)]);
    let leftovers = processesWithEnv('SPARK_EXEC_SVC_TEST_MARK', mark);
    for (let i = 0; i < 50 && leftovers.length > 0; i += 1) {
      await sleep(20);
      leftovers = processesWithEnv('SPARK_EXEC_SVC_TEST_MARK', mark);
    }
    return {
      code: exit.code,
      signal: exit.signal,
      stdout,
      stderr,
      sentAtMs: sentAt - firstLookUp,
      exitAfterMs: exit.at - sentAt,
      nsPid,
      leftovers,
    };
  } finally {
    // whatever happened: nothing of this run survives it
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (wrapperPid !== undefined && wrapperPid !== child.pid) {
      try {
        process.kill(wrapperPid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    for (const p of processesWithEnv('SPARK_EXEC_SVC_TEST_MARK', mark)) {
      try {
        process.kill(Number(p.split(' ')[0]), 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}

describe.each(signalShells)('executor-entrypoint.sh stopped during its DNS wait, under $name', ({ cmd }) => {
  // the first look-up never returns; cut off at the bound by `timeout` or by the watchdog
  const hangingTimeout = { phase: 'a hanging look-up (timeout)', env: { FAKE_DNS_HANG: '30' } };
  const hangingWatchdog = { phase: 'a hanging look-up (watchdog)', env: { FAKE_DNS_HANG: '30', PATH: `${fakeBin}:${noTimeoutBin}` } };
  // "not found" at once, then a 2 s pause
  const pause = { phase: 'the pause between look-ups', env: { SPARK_EXEC_SVC_WAIT_INTERVAL: '2' } };
  const phases = [hangingTimeout, hangingWatchdog, pause];
  const cases = [
    ...phases.map((p) => ({ ...p, pid1: false, signal: 'SIGTERM' as const, code: 143 })),
    { ...hangingTimeout, pid1: false, signal: 'SIGINT' as const, code: 130 },
    ...phases.map((p) => ({ ...p, pid1: true, signal: 'SIGTERM' as const, code: 143 })),
  ];
  // one at a time: the exit is timed by this process's event loop, which other tests would hold up
  describe.each(cases)('$signal in $phase', ({ env, pid1, signal, code }) => {
    const as = pid1 ? 'as PID 1 of its PID namespace' : 'as a plain process';
    it.skipIf(pid1 && pid1Skip !== '')(
      `${as}: exits ${code} within ${SIGNAL_EXIT_MS} ms, kills what it waited on, never starts java${pid1 && pid1Skip !== '' ? ` (SKIPPED: ${pid1Skip})` : ''}`,
      { timeout: 20_000 },
      async () => {
        const r = await signalDuringWait(cmd, pid1, signal, env);
        console.log(
          `[signal] ${cmd.join(' ')} ${as}, ${signal} ${(r.sentAtMs / 1000).toFixed(2)} s into the wait: exit ${r.code ?? r.signal} after ${r.exitAfterMs.toFixed(0)} ms; ${r.stderr.trim().split('\n').at(-1)}`,
        );
        if (pid1) expect(r.nsPid).toMatch(/\s1$/);
        expect({ code: r.code, signal: r.signal }).toEqual({ code, signal: null });
        expect(r.exitAfterMs).toBeLessThanOrEqual(SIGNAL_EXIT_MS);
        expect(r.stdout).toBe(''); // neither Spark's entrypoint nor java ran
        expect(r.stderr).toContain(`${signal} while waiting for`);
        expect(r.leftovers).toEqual([]);
      },
    );
  });
});

describe('java-shim.sh', () => {
  function shim(args: string[], env: Record<string, string>): Promise<Result> {
    return runScript('sh', [join(home, 'jvm', 'bin', 'java'), ...args], {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      SPARK_EXEC_SVC_REAL_JAVA: join(jdk, 'bin', 'java'),
      ...env,
    });
  }

  it('leaves every other java command alone and restores JAVA_HOME', async () => {
    const r = await shim(['-version', '--hostname', 'x'], {
      SPARK_EXEC_SVC_ADVERTISE_HOST: 'svc-a.ns.svc',
      SPARK_EXEC_SVC_REAL_JAVA_HOME: jdk,
    });
    expect(r.args).toEqual(['-version', '--hostname', 'x']);
    expect(r.javaHome).toBe(jdk);
    const unset = await shim(['-version'], {});
    expect(unset.javaHome).toBe('<unset>');
  });

  it('keeps a --bind-address that is already there, and handles CoarseGrainedExecutorBackend', async () => {
    const r = await shim(
      ['-cp', 'x', 'org.apache.spark.executor.CoarseGrainedExecutorBackend', '--hostname', '10.0.0.9', '--bind-address', '0.0.0.0'],
      { SPARK_EXEC_SVC_ADVERTISE_HOST: 'svc-a.ns.svc' },
    );
    expect(r.args).toEqual([
      '-cp',
      'x',
      '-Dspark.port.maxRetries=0',
      'org.apache.spark.executor.CoarseGrainedExecutorBackend',
      '--hostname',
      'svc-a.ns.svc',
      '--bind-address',
      '0.0.0.0',
    ]);
  });

  it('keeps arguments with spaces and shell characters intact', async () => {
    const tricky = ['-Dspark.x=a b', '$(id)', '*', "it's", BACKEND, '--hostname', 'fd00::7'];
    const r = await shim(tricky, { SPARK_EXEC_SVC_ADVERTISE_HOST: 'svc-a.ns.svc' });
    expect(r.args).toEqual([
      ...tricky.slice(0, 4),
      '-Dspark.port.maxRetries=0',
      BACKEND,
      '--hostname',
      'svc-a.ns.svc',
      '--bind-address',
      'fd00::7',
    ]);
  });

  it('rewrites nothing when the JVM would not get the port the Service forwards', async () => {
    const env = { SPARK_EXEC_SVC_ADVERTISE_HOST: 'svc-a.ns.svc', SPARK_EXEC_SVC_PORT: '7079' };
    for (const jvmOpts of [
      [], // an entrypoint that does not pass SPARK_JAVA_OPT_*: the block manager would take a random port
      ['-Dspark.blockManager.port=7100'],
      ['-Dspark.blockManager.port=7079', '-Dspark.blockManager.port=7100'], // the JVM keeps the last -D
    ]) {
      const argv = [...jvmOpts, '-cp', 'x', BACKEND, '--hostname', '10.0.0.9', '--podName', 'p'];
      const r = await shim(argv, env);
      expect(r.args).toEqual(argv);
      expect(r.stderr).toContain('executor keeps advertising its pod IP');
    }
    // a -D after the class name is a program argument, not the JVM's
    const after = await shim(['-Dspark.blockManager.port=7079', BACKEND, '--hostname', '10.0.0.9', '-Dspark.blockManager.port=7100'], env);
    expect(argAfter(after.args, '--hostname')).toBe('svc-a.ns.svc');
    const ok = await shim(['-Dspark.blockManager.port=7100', '-Dspark.blockManager.port=7079', BACKEND, '--hostname', '10.0.0.9'], env);
    expect(ok.args).toEqual([
      '-Dspark.blockManager.port=7100',
      '-Dspark.blockManager.port=7079',
      '-Dspark.port.maxRetries=0',
      BACKEND,
      '--hostname',
      'svc-a.ns.svc',
      '--bind-address',
      '10.0.0.9',
    ]);
  });
});

describe('pod template and ConfigMap', () => {
  const kustomization = loadYaml<{
    configMapGenerator: { name: string; files: string[] }[];
    generatorOptions: { disableNameSuffixHash: boolean };
  }>(readFileSync(join(SPARK_DIR, 'kustomization.yaml'), 'utf8'));
  const generator = kustomization.configMapGenerator[0];

  it('runs the wrapper as command, without args, with the namespace, opt-in label and no service links', () => {
    interface EnvVar {
      name: string;
      value?: string;
      valueFrom?: { fieldRef?: { fieldPath: string } };
    }
    interface Template {
      metadata: { labels: Record<string, string> };
      spec: {
        enableServiceLinks: boolean;
        containers: {
          name: string;
          command: string[];
          args?: string[];
          env: EnvVar[];
          volumeMounts: { name: string; mountPath: string }[];
        }[];
        volumes: {
          name: string;
          configMap: { name: string; optional?: boolean; defaultMode: number; items: { key: string; path: string }[] };
        }[];
      };
    }
    const pod = loadYaml<Template>(readFileSync(join(SPARK_DIR, 'executor-pod-template.yaml'), 'utf8'));
    const containerEnv = pod.spec.containers[0]?.env ?? [];
    expect(containerEnv.find((e) => e.name === 'SPARK_EXEC_SVC_PORT_ANNOTATION')?.valueFrom?.fieldRef?.fieldPath).toBe(
      "metadata.annotations['spark-exec-svc/block-manager-port']",
    );
    expect(pod.metadata.labels['spark-exec-svc/enabled']).toBe('true');
    expect(pod.spec.enableServiceLinks).toBe(false);
    const container = pod.spec.containers[0];
    if (container === undefined) throw new Error('no container');
    expect(container.name).toBe('spark-kubernetes-executor');
    // sh -c runs the wrapper when the ConfigMap is mounted, stock Spark otherwise (test/install-story.test.ts runs it).
    expect([...container.command.slice(0, 2), ...container.command.slice(3)]).toEqual(['/bin/sh', '-c', 'spark-exec-svc']);
    expect(container.command[2]).toContain('exec /bin/sh "$w" "$@"');
    expect(container.args).toBeUndefined(); // Spark appends "executor" to the template's args
    expect(container.env.find((e) => e.name === 'SPARK_EXECUTOR_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.namespace');
    for (const sparkOwned of ['SPARK_EXECUTOR_POD_IP', 'SPARK_APPLICATION_ID', 'SPARK_EXECUTOR_ID', 'JAVA_HOME']) {
      expect(container.env.map((e) => e.name)).not.toContain(sparkOwned);
    }
    const volume = pod.spec.volumes[0];
    if (volume === undefined) throw new Error('no volume');
    expect(container.volumeMounts).toContainEqual(expect.objectContaining({ name: volume.name, mountPath: '/opt/spark-exec-svc' }));
    expect(volume.configMap.name).toBe(generator?.name);
    expect(volume.configMap.defaultMode).toBe(0o755);
    expect(volume.configMap.optional).toBe(true);
    expect(volume.configMap.items).toEqual([
      { key: 'executor-entrypoint.sh', path: 'executor-entrypoint.sh' },
      { key: 'exec-svc-name.sh', path: 'exec-svc-name.sh' },
      { key: 'java-shim.sh', path: 'jvm/bin/java' },
    ]);
    expect(kustomization.generatorOptions.disableNameSuffixHash).toBe(true);
  });

  it.skipIf(skipWithoutKubectl('entrypoint.test', 'kubectl kustomize spark/'))(
    'kubectl kustomize spark/ builds the ConfigMap with the three scripts, offline',
    () => {
      const built = spawnSync(requireKubectl(), ['kustomize', SPARK_DIR], { encoding: 'utf8' });
      expect(built.status).toBe(0);
      const docs = loadAllYaml(built.stdout) as { kind: string; metadata: { name: string }; data: Record<string, string> }[];
      expect(docs).toHaveLength(1);
      const cm = docs[0];
      expect(cm?.kind).toBe('ConfigMap');
      expect(cm?.metadata.name).toBe('spark-exec-svc-scripts');
      for (const f of generator?.files ?? []) expect(cm?.data[f]).toBe(readFileSync(join(SPARK_DIR, f), 'utf8'));
    },
  );
});
