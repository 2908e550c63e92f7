// Unit tests of shared/model/naming.ts (the rule is in docs/naming.md; the shell twin is tested in
// test/executor/naming-shell-parity.test.ts).
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DNS1035_LABEL_MAX, executorServiceName, isDns1035Label } from '../../shared/model/naming.ts';

const hex32 = fc.stringMatching(/^[0-9a-f]{32}$/);
const execId = fc.integer({ min: 1, max: 100_000 }).map(String);
const labelValue = fc.string({
  unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-'.split('')),
  minLength: 1,
  maxLength: 63,
});

function hash10(app: string, exec: string): string {
  return createHash('sha256').update(`${app}/${exec}`, 'utf8').digest('hex').slice(0, 10);
}

describe('executorServiceName', () => {
  it("gives Spark's own SPARK-52505 name for Spark's default application ids (<= 62 bytes)", () => {
    fc.assert(
      fc.property(hex32, execId, (h, exec) => {
        const app = `spark-${h}`;
        const name = executorServiceName(app, exec);
        expect(name).toBe(`svc-${app}-exec-${exec}`);
        expect(Buffer.byteLength(name)).toBeLessThanOrEqual(62);
        expect(isDns1035Label(name)).toBe(true);
      }),
      { numRuns: 500 },
    );
    // the longest: 4 + 38 + 6 + 6 ("100000") = 54 bytes
    expect(executorServiceName(`spark-${'f'.repeat(32)}`, '100000')).toHaveLength(54);
  });

  it('keeps "spark-application-<ms>" ids plain', () => {
    expect(executorServiceName('spark-application-1700000000000', '100000')).toBe('svc-spark-application-1700000000000-exec-100000');
  });

  it('is injective over the inputs Spark produces: no two (app id, exec id) pairs share a name', () => {
    // Written from the rule, not from the code: a plain name is "svc-" A "-exec-" E; a valid
    // pair can produce a given name only as its plain form (A a label value, E a canonical
    // decimal) or as its fallback. So: (1) every name parses back to at most one plain pair,
    // (2) no fallback name parses as a plain name of any valid pair, (3) fallbacks of distinct
    // pairs differ (generated, including bodies cut exactly after "-exec").
    const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
    const plainPairOf = (name: string): [string, string] | undefined => {
      const m = /^svc-(.+)-exec-([1-9][0-9]*)$/.exec(name);
      return m !== null && m[1]!.length <= 63 && LABEL_VALUE.test(m[1]!) ? [m[1]!, m[2]!] : undefined;
    };
    const decimal = fc.bigInt({ min: 1n, max: 10n ** 19n - 1n }).map(String);
    // App ids that land the 47-byte cut right after "-exec", and ones that contain "-exec-<digits>" themselves.
    const tricky = fc.oneof(
      fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.]{40}[A-Za-z0-9]$/),
      fc.tuple(fc.stringMatching(/^[a-z][a-z0-9]{0,20}$/), decimal).map(([a, n]) => `${a}-exec-${n}`),
      fc.stringMatching(/^[A-Z][A-Za-z0-9._-]{0,40}[a-z0-9]$/),
    );
    const app = fc.oneof(
      labelValue.filter((v) => LABEL_VALUE.test(v)),
      tricky.filter((v) => v.length <= 63 && LABEL_VALUE.test(v)),
      hex32.map((h) => `spark-${h}`),
    );
    fc.assert(
      fc.property(app, decimal, app, decimal, (a1, e1, a2, e2) => {
        const n1 = executorServiceName(a1, e1);
        const n2 = executorServiceName(a2, e2);
        if (a1 !== a2 || e1 !== e2) expect(n1).not.toBe(n2);
        for (const [a, e, n] of [
          [a1, e1, n1],
          [a2, e2, n2],
        ] as const) {
          const plain = `svc-${a}-exec-${e}`;
          if (n === plain) expect(plainPairOf(n)).toEqual([a, e]);
          else expect(plainPairOf(n), `${a}/${e} -> ${n}`).toBeUndefined();
        }
      }),
      { numRuns: 20_000 },
    );
    // The case that broke the old rule: a body cut right after "-exec" and an all-digit hash.
    const cutAfterExec = `${'a'.repeat(42)}`;
    const name = executorServiceName(`${cutAfterExec}_`, '7'.repeat(19));
    expect(name.startsWith(`svc-${cutAfterExec}-exec-h`)).toBe(true);
    expect(plainPairOf(name)).toBeUndefined();
  });

  it('falls back to a valid DNS-1035 label of <= 63 bytes for any input', () => {
    fc.assert(
      fc.property(fc.oneof(labelValue, fc.string({ unit: 'grapheme', maxLength: 100 })), fc.oneof(execId, fc.string()), (app, exec) => {
        const name = executorServiceName(app, exec);
        expect(isDns1035Label(name)).toBe(true);
        expect(Buffer.byteLength(name, 'utf8')).toBeLessThanOrEqual(DNS1035_LABEL_MAX);
      }),
      { numRuns: 2000 },
    );
  });

  it('builds the fallback from the sanitized body and a 10-hex sha256 of "app/exec"', () => {
    expect(executorServiceName('My_App.Name', '3')).toBe(`svc-my-app-name-exec-3-h${hash10('My_App.Name', '3')}`);
    expect(executorServiceName('--A__B--', '7')).toBe(`svc-a-b-exec-7-h${hash10('--A__B--', '7')}`);
    expect(executorServiceName('é€', '🙂')).toBe(`svc-exec-h${hash10('é€', '🙂')}`);
    expect(executorServiceName('___', '')).toBe(`svc-exec-h${hash10('___', '')}`);
    expect(executorServiceName('', '')).toBe(`svc-exec-h${hash10('', '')}`);
    // nothing left of the body at all (hypothetical: the body always contains "exec")
    expect(executorServiceName('x'.repeat(100), '1')).toBe(`svc-${'x'.repeat(47)}-h${hash10('x'.repeat(100), '1')}`);
  });

  it('switches to the fallback exactly above 63 bytes', () => {
    const app63 = 'a'.repeat(63 - 'svc--exec-12345'.length);
    expect(executorServiceName(app63, '12345')).toBe(`svc-${app63}-exec-12345`);
    expect(executorServiceName(app63, '12345')).toHaveLength(63);
    const app64 = `${app63}a`;
    expect(executorServiceName(app64, '12345')).toBe(`${`svc-${app64}-exec-12345`.slice(0, 4 + 47)}-h${hash10(app64, '12345')}`);
    expect(executorServiceName(app64, '12345')).toHaveLength(63);
  });

  it('does not end the body with "-" after the 47-byte cut', () => {
    // body "bbb…b-x-exec-42": choose the length so that byte 47 is the "-" before "x"
    const app = `${'b'.repeat(46)}_x`;
    const name = executorServiceName(app, '42');
    expect(name).toBe(`svc-${'b'.repeat(46)}-h${hash10(app, '42')}`);
  });

  it('treats an upper-case or otherwise invalid plain name as a fallback case', () => {
    expect(executorServiceName('App', '1')).not.toBe('svc-App-exec-1');
    expect(executorServiceName('app', '1-')).toMatch(/^svc-app-exec-1-h[0-9a-f]{10}$/);
    expect(isDns1035Label(executorServiceName('app', '1-'))).toBe(true);
  });

  it('gives different names to different inputs (generated set)', () => {
    const inputs = fc.sample(
      fc.tuple(
        fc.oneof(
          labelValue,
          hex32.map((h) => `spark-${h}`),
        ),
        execId,
      ),
      { numRuns: 5000, seed: 7 },
    );
    const byName = new Map<string, string>();
    const collisions: string[] = [];
    for (const [app, exec] of inputs) {
      const key = `${app}/${exec}`;
      const name = executorServiceName(app, exec);
      const previous = byName.get(name);
      if (previous !== undefined && previous !== key) collisions.push(`${previous} and ${key} -> ${name}`);
      byName.set(name, key);
    }
    expect(collisions).toEqual([]);
    // the shapes that sanitize to the same body are told apart by the hash
    const twins = [
      ['my_app', '1'],
      ['my.app', '1'],
      ['MY-APP', '1'],
      ['my--app', '1'],
    ] as const;
    const names = twins.map(([app, exec]) => executorServiceName(app, exec));
    expect(new Set(names).size).toBe(twins.length);
  });

  it('is deterministic', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (app, exec) => {
        expect(executorServiceName(app, exec)).toBe(executorServiceName(app, exec));
      }),
      { numRuns: 300 },
    );
    expect(executorServiceName('My_App', '3')).toBe(`svc-my-app-exec-3-h${hash10('My_App', '3')}`);
  });
});

describe('isDns1035Label', () => {
  it('accepts labels and rejects the rest', () => {
    for (const ok of ['a', 'svc-x-exec-1', `a${'b'.repeat(62)}`]) expect(isDns1035Label(ok)).toBe(true);
    for (const bad of ['', '1a', '-a', 'a-', 'A', 'a_b', 'a.b', `a${'b'.repeat(63)}`, 'é', 'a\n']) {
      expect(isDns1035Label(bad)).toBe(false);
    }
  });
});
