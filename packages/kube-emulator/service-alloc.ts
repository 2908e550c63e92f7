/**
 * What the Service REST storage does around validation (pkg/registry/core/service/storage):
 * keep allocated values a client left out on update, drop type-dependent fields on type
 * changes, set the IP-family fields, and hold cluster IPs / node ports in the allocators.
 */
import { externallyAccessible } from './defaults.ts';
import { ClusterIPAllocator, NodePortAllocator } from './ipalloc.ts';
import { type FieldError, fieldInvalid, fieldNotSupported, goStringSlice } from './status.ts';
import { array, deepEqual, getPath, isRecord, type Obj, record, str } from './types.ts';

const FAMILY_POLICIES = ['PreferDualStack', 'RequireDualStack', 'SingleStack'];

function specOf(svc: Obj): Obj {
  const spec = svc['spec'];
  if (isRecord(spec)) return spec;
  const fresh: Obj = {};
  svc['spec'] = fresh;
  return fresh;
}

const needsClusterIP = (svc: Obj): boolean => getPath(svc, 'spec', 'type') !== 'ExternalName';
function needsNodePorts(svc: Obj): boolean {
  const type = getPath(svc, 'spec', 'type');
  return type === 'NodePort' || (type === 'LoadBalancer' && getPath(svc, 'spec', 'allocateLoadBalancerNodePorts') !== false);
}
const nodePortsOf = (svc: Obj): number[] =>
  array(getPath(svc, 'spec', 'ports'))
    .map((p) => (isRecord(p) && typeof p['nodePort'] === 'number' ? p['nodePort'] : 0))
    .filter((n) => n !== 0);
const clusterIPsOf = (svc: Obj): string[] => array(getPath(svc, 'spec', 'clusterIPs')).map(str);

export class ServiceAllocations {
  private readonly ips = new ClusterIPAllocator();
  private readonly ports = new NodePortAllocator();

  /** Before defaulting/validation on update: patchAllocatedValues, normalizeClusterIPs, dropTypeDependentFields. */
  prepareUpdate(svc: Obj, old: Obj): void {
    const spec = specOf(svc);
    const oldSpec = record(old['spec']);
    if (needsClusterIP(old) && needsClusterIP(svc)) {
      if (str(spec['clusterIP']) === '' && array(spec['clusterIPs']).length === 0) {
        spec['clusterIP'] = oldSpec['clusterIP'];
        spec['clusterIPs'] = oldSpec['clusterIPs'];
      }
      if (array(spec['ipFamilies']).length === 0 && oldSpec['ipFamilies'] !== undefined) spec['ipFamilies'] = oldSpec['ipFamilies'];
      if (spec['ipFamilyPolicy'] === undefined && oldSpec['ipFamilyPolicy'] !== undefined)
        spec['ipFamilyPolicy'] = oldSpec['ipFamilyPolicy'];
    }
    // The user changed the singular clusterIP only: the plural follows it.
    if (str(spec['clusterIP']) !== str(oldSpec['clusterIP']) && deepEqual(spec['clusterIPs'], oldSpec['clusterIPs'])) {
      if (str(spec['clusterIP']) !== '') spec['clusterIPs'] = [spec['clusterIP']];
      else delete spec['clusterIPs'];
    }
    if (needsNodePorts(old) && needsNodePorts(svc)) {
      const byName = new Map<string, number>();
      for (const p of array(oldSpec['ports'])) if (isRecord(p)) byName.set(str(p['name']), Number(p['nodePort'] ?? 0));
      const used = new Set(nodePortsOf(svc));
      for (const p of array(spec['ports'])) {
        if (!isRecord(p) || (typeof p['nodePort'] === 'number' && p['nodePort'] !== 0)) continue;
        const oldValue = byName.get(str(p['name'])) ?? 0;
        if (oldValue !== 0 && !used.has(oldValue)) p['nodePort'] = oldValue;
      }
    }
    if (needsNodePorts(old) && !needsNodePorts(svc) && deepEqual(nodePortsOf(old), nodePortsOf(svc))) {
      for (const p of array(spec['ports'])) if (isRecord(p)) delete p['nodePort'];
    }
    const oldEtp = oldSpec['externalTrafficPolicy'];
    if (externallyAccessible(oldSpec) && !externallyAccessible(spec) && spec['externalTrafficPolicy'] === oldEtp) {
      delete spec['externalTrafficPolicy'];
    }
    if (needsClusterIP(old) && !needsClusterIP(svc) && deepEqual(clusterIPsOf(old), clusterIPsOf(svc))) {
      for (const key of ['clusterIP', 'clusterIPs', 'ipFamilies', 'ipFamilyPolicy', 'internalTrafficPolicy']) delete spec[key];
    }
  }

  /**
   * After validation: IP families, cluster IP and node ports. `old` is the stored object
   * on update. Returns field errors and holds nothing when there are any.
   */
  allocate(svc: Obj, old: Obj | undefined, dryRun: boolean): FieldError[] {
    const spec = specOf(svc);
    const undo: Array<() => void> = [];
    const errs: FieldError[] = [];
    const fail = (e: FieldError): void => {
      errs.push(e);
    };

    if (needsClusterIP(svc)) {
      const headless = spec['clusterIP'] === 'None';
      const policy = spec['ipFamilyPolicy'];
      if (policy === undefined) spec['ipFamilyPolicy'] = headless && spec['selector'] === undefined ? 'RequireDualStack' : 'SingleStack';
      else if (typeof policy === 'string' && !FAMILY_POLICIES.includes(policy))
        fail(fieldNotSupported('spec.ipFamilyPolicy', policy, FAMILY_POLICIES));
      else if (policy === 'RequireDualStack' && !headless)
        fail(fieldInvalid('spec.ipFamilyPolicy', policy, 'this cluster is not configured for dual-stack services'));
      const families = array(spec['ipFamilies']).map(str);
      families.forEach((f, i) => {
        if (f !== 'IPv4') fail(fieldInvalid(`spec.ipFamilies[${i}]`, f, 'not configured on this cluster'));
      });
      if (families.length === 0) spec['ipFamilies'] = ['IPv4'];

      const wanted = str(spec['clusterIP']);
      const held = old !== undefined && needsClusterIP(old) ? str(getPath(old, 'spec', 'clusterIP')) : '';
      if (wanted === 'None') spec['clusterIPs'] = ['None'];
      else if (wanted === '') {
        const ip = this.ips.allocateNext(dryRun);
        if (!dryRun) undo.push(() => this.ips.release(ip));
        spec['clusterIP'] = ip;
        spec['clusterIPs'] = [ip];
      } else if (wanted !== held) {
        const problem = this.ips.allocateSpecific(wanted, dryRun);
        if (problem !== undefined) fail(fieldInvalid('spec.clusterIPs', goStringSlice([wanted]), problem));
        else if (!dryRun) undo.push(() => this.ips.release(wanted));
        spec['clusterIPs'] = [wanted];
      }
    }

    if (needsNodePorts(svc)) {
      const heldPorts = new Set(old !== undefined ? nodePortsOf(old) : []);
      array(spec['ports']).forEach((p, i) => {
        if (!isRecord(p)) return;
        const want = typeof p['nodePort'] === 'number' ? p['nodePort'] : 0;
        if (want === 0) {
          const port = this.ports.allocateNext(dryRun);
          if (!dryRun) undo.push(() => this.ports.release(port));
          p['nodePort'] = port;
        } else if (!heldPorts.has(want)) {
          const problem = this.ports.allocateSpecific(want, dryRun);
          if (problem !== undefined) fail(fieldInvalid(`spec.ports[${i}].nodePort`, want, problem));
          else if (!dryRun) undo.push(() => this.ports.release(want));
        }
      });
    }

    if (errs.length > 0) for (const u of undo.reverse()) u();
    return errs;
  }

  /** After a successful update: give back what the old object held and the new one does not. */
  releaseUnused(svc: Obj, old: Obj): void {
    const newIP = needsClusterIP(svc) ? str(getPath(svc, 'spec', 'clusterIP')) : '';
    const oldIP = needsClusterIP(old) ? str(getPath(old, 'spec', 'clusterIP')) : '';
    if (oldIP !== '' && oldIP !== 'None' && oldIP !== newIP) this.ips.release(oldIP);
    const keep = new Set(needsNodePorts(svc) ? nodePortsOf(svc) : []);
    for (const port of nodePortsOf(old)) if (!keep.has(port)) this.ports.release(port);
  }

  release(svc: Obj): void {
    const ip = str(getPath(svc, 'spec', 'clusterIP'));
    if (needsClusterIP(svc) && ip !== '' && ip !== 'None') this.ips.release(ip);
    for (const port of nodePortsOf(svc)) this.ports.release(port);
  }
}
