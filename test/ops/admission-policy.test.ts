/**
 * The ValidatingAdmissionPolicy we ship (knative/overlays/admission-policy/policy.yaml), its CEL
 * evaluated as the API server evaluates it (k8s.io/apiserver pkg/admission/plugin/policy/validating):
 * matchConditions first (all true, or the policy does not apply), then the variables in order
 * (each sees the ones before), then every validation (all true, or the request is denied with
 * the messageExpression). The evaluator is @marcbachmann/cel-js (standard CEL and its macros; the
 * policy uses nothing of Kubernetes' CEL libraries, so that it is testable here). The cases are
 * the ones of issue 17; on a real API server the e2e harness runs them again.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { evaluate } from '@marcbachmann/cel-js';
import { load } from 'js-yaml';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const POLICY_FILE = path.join(ROOT, 'knative/overlays/admission-policy/policy.yaml');

interface Policy {
  spec: {
    matchConstraints: { resourceRules: { operations: string[]; resources: string[] }[] };
    matchConditions: { name: string; expression: string }[];
    variables: { name: string; expression: string }[];
    validations: { expression: string; messageExpression: string; reason: string }[];
  };
}
const policy = load(readFileSync(POLICY_FILE, 'utf8')) as Policy;

type Labels = Record<string, string>;
interface PodLike {
  metadata: { name: string; namespace: string; labels?: Labels; ownerReferences?: Record<string, unknown>[] };
}
type Verdict = { applies: false } | { applies: true; allowed: true } | { applies: true; allowed: false; messages: string[] };

/** The admission decision for one request, by the policy's CEL. */
function admit(operation: 'CREATE' | 'UPDATE', username: string, object: PodLike, oldObject: PodLike | null = null): Verdict {
  const request = {
    operation,
    namespace: object.metadata.namespace,
    userInfo: { username },
    resource: { group: '', version: 'v1', resource: 'pods' },
  };
  const context: Record<string, unknown> = { object, oldObject, request };
  for (const condition of policy.spec.matchConditions) {
    if (evaluate(condition.expression, context) !== true) return { applies: false };
  }
  const variables: Record<string, unknown> = {};
  for (const variable of policy.spec.variables) variables[variable.name] = evaluate(variable.expression, { ...context, variables });
  const messages: string[] = [];
  for (const validation of policy.spec.validations) {
    const ok = evaluate(validation.expression, { ...context, variables });
    expect(typeof ok, validation.expression).toBe('boolean');
    if (ok !== true) messages.push(String(evaluate(validation.messageExpression, { ...context, variables })));
  }
  return messages.length === 0 ? { applies: true, allowed: true } : { applies: true, allowed: false, messages };
}

const NS = 'spark';
const DRIVER_SA = `system:serviceaccount:${NS}:spark`;
const OPERATOR = 'system:serviceaccount:spark-operator:spark-operator-controller';
const TENANT = `system:serviceaccount:${NS}:default`;
const TENANT_USER = 'alice@example.com';
const GC = 'system:serviceaccount:kube-system:generic-garbage-collector';

const driverRef = { apiVersion: 'v1', kind: 'Pod', name: 'app-driver', uid: '7f0c9c4e-1111-4c55-9d7e-0123456789ab', controller: true };
const executor = (extra: Partial<PodLike['metadata']> = {}): PodLike => ({
  metadata: {
    name: 'app-exec-1',
    namespace: NS,
    labels: { 'spark-role': 'executor', 'spark-app-selector': 'spark-0123456789abcdef', 'spark-exec-id': '1', 'spark-app-name': 'app' },
    ownerReferences: [driverRef],
    ...extra,
  },
});
const plain = (labels: Labels = { app: 'web' }): PodLike => ({ metadata: { name: 'web-1', namespace: NS, labels } });

describe('the shipped ValidatingAdmissionPolicy', () => {
  it('matches pod CREATE and UPDATE only (not DELETE, not subresources such as pods/status)', () => {
    expect(policy.spec.matchConstraints.resourceRules).toEqual([
      expect.objectContaining({ operations: ['CREATE', 'UPDATE'], resources: ['pods'] }),
    ]);
  });

  it("refuses a tenant's copy of an executor, whoever it names as owner", () => {
    for (const who of [TENANT, TENANT_USER, `system:serviceaccount:tenant:spark`]) {
      const verdict = admit('CREATE', who, executor());
      expect(verdict, who).toMatchObject({ applies: true, allowed: false });
      expect((verdict as { messages: string[] }).messages[0]).toContain(who);
    }
    // A Pending copy without an owner, or owned by the tenant's own pod: refused the same.
    expect(admit('CREATE', TENANT, executor({ ownerReferences: [] }))).toMatchObject({ allowed: false });
    expect(admit('CREATE', TENANT, executor({ ownerReferences: [{ ...driverRef, name: 'tenant-pod', uid: 'x' }] }))).toMatchObject({
      allowed: false,
    });
  });

  it('refuses a selector impostor: only the two labels the executor Service selects, no spark-role', () => {
    const impostor = plain({ 'spark-app-selector': 'spark-0123456789abcdef', 'spark-exec-id': '1' });
    expect(admit('CREATE', TENANT, impostor)).toMatchObject({ applies: true, allowed: false });
  });

  it("admits the executors the Spark driver's ServiceAccount creates, and what the Spark operator creates", () => {
    expect(admit('CREATE', DRIVER_SA, executor())).toEqual({ applies: true, allowed: true });
    expect(admit('CREATE', OPERATOR, executor())).toEqual({ applies: true, allowed: true });
  });

  it("a driver ServiceAccount name is trusted in the pod's own namespace only", () => {
    const elsewhere = executor({ namespace: 'team-b' });
    expect(admit('CREATE', 'system:serviceaccount:team-b:spark', elsewhere)).toEqual({ applies: true, allowed: true });
    expect(admit('CREATE', DRIVER_SA, elsewhere)).toMatchObject({ allowed: false });
  });

  it("refuses relabelling an existing pod into an executor, or changing an executor's labels", () => {
    const web = plain();
    expect(admit('UPDATE', TENANT, plain({ app: 'web', 'spark-role': 'executor' }), web)).toMatchObject({ applies: true, allowed: false });
    expect(
      admit('UPDATE', TENANT, plain({ app: 'web', 'spark-app-selector': 'spark-0123456789abcdef', 'spark-exec-id': '1' }), web),
    ).toMatchObject({ allowed: false });
    const exec = executor();
    const moved = executor({ labels: { ...exec.metadata.labels!, 'spark-app-selector': 'spark-fedcba9876543210' } });
    expect(admit('UPDATE', TENANT, moved, exec)).toMatchObject({ allowed: false });
    const unlabelled = executor({ labels: { 'spark-app-name': 'app' } });
    expect(admit('UPDATE', TENANT, unlabelled, exec)).toMatchObject({ allowed: false });
    // The driver may (Spark itself never relabels, but the identity is trusted).
    expect(admit('UPDATE', DRIVER_SA, moved, exec)).toEqual({ applies: true, allowed: true });
  });

  it('refuses adding or changing owner references of an executor; dropping one (garbage collector) passes', () => {
    const exec = executor();
    const adopted = executor({ ownerReferences: [driverRef, { apiVersion: 'v1', kind: 'Pod', name: 'tenant', uid: 'u2' }] });
    expect(admit('UPDATE', TENANT, adopted, exec)).toMatchObject({ allowed: false });
    const reowned = executor({ ownerReferences: [{ ...driverRef, uid: 'another' }] });
    expect(admit('UPDATE', TENANT, reowned, exec)).toMatchObject({ allowed: false });
    expect(admit('UPDATE', GC, executor({ ownerReferences: [] }), exec)).toEqual({ applies: true, allowed: true });
  });

  it('lets anyone make other changes to an executor (annotations, other labels)', () => {
    const exec = executor();
    const annotated = executor({ labels: { ...exec.metadata.labels!, team: 'a' } });
    expect(admit('UPDATE', TENANT, annotated, exec)).toEqual({ applies: true, allowed: true });
  });

  it('leaves non-Spark pods and Spark drivers alone (the policy does not apply)', () => {
    expect(admit('CREATE', TENANT, plain())).toEqual({ applies: false });
    expect(admit('CREATE', TENANT, { metadata: { name: 'bare', namespace: NS } })).toEqual({ applies: false });
    expect(admit('UPDATE', TENANT, plain({ app: 'web', tier: 'x' }), plain())).toEqual({ applies: false });
    const driver = plain({ 'spark-role': 'driver', 'spark-app-selector': 'spark-0123456789abcdef' });
    expect(admit('CREATE', TENANT_USER, driver)).toEqual({ applies: false });
  });
});
