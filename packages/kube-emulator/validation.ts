/**
 * Validation of decoded, defaulted objects: a subset of pkg/apis/core/validation (v1.32)
 * with the same field paths and messages. Returns the FieldErrors; the caller turns a
 * non-empty list into 422 Invalid.
 */
import { externallyAccessible } from './defaults.ts';
import {
  isDns1035Label,
  isDns1123Label,
  isDns1123Subdomain,
  isIPv4,
  isQualifiedName,
  isValidLabelValue,
  isValidPortName,
  isValidPortNum,
} from './names.ts';
import {
  type FieldError,
  fieldDuplicate,
  fieldForbidden,
  fieldInvalid,
  fieldNotSupported,
  fieldRequired,
  fieldTooLong,
  goQuote,
  goStringSlice,
} from './status.ts';
import { array, deepEqual, getPath, isRecord, type Obj, record, str, stringMap } from './types.ts';

type NameFn = (name: string, prefix: boolean) => string[];

/** generateName prefixes may end in '-': masked the way Go's maskTrailingDash does. */
function maskTrailingDash(name: string): string {
  return name.length > 1 && name.endsWith('-') ? `${name.slice(0, -2)}a` : name;
}

export const podNameFn: NameFn = (name, prefix) => isDns1123Subdomain(prefix ? maskTrailingDash(name) : name);
export const serviceNameFn: NameFn = (name, prefix) => isDns1035Label(prefix ? maskTrailingDash(name) : name);

const ANNOTATIONS_LIMIT = 256 * 1024;

export function validateLabels(labels: Record<string, string>, field: string): FieldError[] {
  const errs: FieldError[] = [];
  for (const key of Object.keys(labels).sort()) {
    for (const msg of isQualifiedName(key)) errs.push(fieldInvalid(field, key, msg));
    for (const msg of isValidLabelValue(labels[key] ?? '')) errs.push(fieldInvalid(field, labels[key] ?? '', msg));
  }
  return errs;
}

function validateAnnotations(annotations: Record<string, string>): FieldError[] {
  const errs: FieldError[] = [];
  let size = 0;
  for (const key of Object.keys(annotations).sort()) {
    for (const msg of isQualifiedName(key.toLowerCase())) errs.push(fieldInvalid('metadata.annotations', key, msg));
    size += Buffer.byteLength(key) + Buffer.byteLength(annotations[key] ?? '');
  }
  if (size > ANNOTATIONS_LIMIT) errs.push(fieldTooLong('metadata.annotations', ANNOTATIONS_LIMIT));
  return errs;
}

function validateOwnerReferences(refs: unknown[]): FieldError[] {
  const errs: FieldError[] = [];
  const field = 'metadata.ownerReferences';
  let firstController = '';
  for (const raw of refs) {
    const ref = record(raw);
    const apiVersion = str(ref['apiVersion']);
    const kind = str(ref['kind']);
    // schema.FromAPIVersionAndKind: "v1" → version v1; "apps/" → empty version.
    const version = apiVersion.includes('/') ? apiVersion.slice(apiVersion.indexOf('/') + 1) : apiVersion;
    if (version === '') errs.push(fieldInvalid(`${field}.apiVersion`, apiVersion, 'version must not be empty'));
    if (kind === '') errs.push(fieldInvalid(`${field}.kind`, kind, 'must not be empty'));
    if (str(ref['name']) === '') errs.push(fieldInvalid(`${field}.name`, str(ref['name']), 'must not be empty'));
    if (str(ref['uid']) === '') errs.push(fieldInvalid(`${field}.uid`, str(ref['uid']), 'must not be empty'));
    if (apiVersion === 'v1' && kind === 'Event') {
      errs.push(fieldInvalid(field, { go: goOwnerRef(ref) }, '/v1, Kind=Event is disallowed from being an owner'));
    }
    if (ref['controller'] === true) {
      const current = `${kind}/${str(ref['name'])}`;
      if (firstController !== '') {
        errs.push(
          fieldInvalid(
            field,
            { go: `[]v1.OwnerReference{...}` },
            `Only one reference can have Controller set to true. Found "true" in references for ${firstController} and ${current}`,
          ),
        );
      } else firstController = current;
    }
  }
  return errs;
}

function goOwnerRef(ref: Obj): string {
  return `v1.OwnerReference{APIVersion:${goQuote(str(ref['apiVersion']))}, Kind:${goQuote(str(ref['kind']))}, Name:${goQuote(
    str(ref['name']),
  )}, UID:${goQuote(str(ref['uid']))}, Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}`;
}

/** The parts of ObjectMeta validation shared by create and update. */
function validateMetaCommon(meta: Obj): FieldError[] {
  const errs: FieldError[] = [];
  const generation = meta['generation'];
  if (typeof generation === 'number' && generation < 0)
    errs.push(fieldInvalid('metadata.generation', generation, 'must be greater than or equal to 0'));
  errs.push(...validateLabels(stringMap(meta['labels']), 'metadata.labels'));
  errs.push(...validateAnnotations(stringMap(meta['annotations'])));
  errs.push(...validateOwnerReferences(array(meta['ownerReferences'])));
  for (const f of array(meta['finalizers'])) {
    const name = str(f);
    for (const msg of isQualifiedName(name)) errs.push(fieldInvalid('metadata.finalizers', name, msg));
  }
  const finalizers = array(meta['finalizers']);
  if (finalizers.includes('orphan') && finalizers.includes('foregroundDeletion'))
    errs.push(
      fieldInvalid('metadata.finalizers', goStringSlice(finalizers.map(str)), 'finalizer orphan and foregroundDeletion cannot be both set'),
    );
  return errs;
}

export function validateObjectMeta(meta: Obj, nameFn: NameFn): FieldError[] {
  const errs: FieldError[] = [];
  const generateName = str(meta['generateName']);
  if (generateName !== '')
    for (const msg of nameFn(generateName, true)) errs.push(fieldInvalid('metadata.generateName', generateName, msg));
  const name = str(meta['name']);
  if (name === '') errs.push(fieldRequired('metadata.name', 'name or generateName is required'));
  else for (const msg of nameFn(name, false)) errs.push(fieldInvalid('metadata.name', name, msg));
  return [...errs, ...validateMetaCommon(meta)];
}

export function validateObjectMetaUpdate(meta: Obj, oldMeta: Obj): FieldError[] {
  const errs: FieldError[] = [];
  if (oldMeta['deletionTimestamp'] !== undefined) {
    const old = new Set(array(oldMeta['finalizers']).map(str));
    const extra = array(meta['finalizers'])
      .map(str)
      .filter((f) => !old.has(f))
      .sort();
    if (extra.length > 0)
      errs.push(
        fieldForbidden(
          'metadata.finalizers',
          `no new finalizers can be added if the object is being deleted, found new finalizers ${goStringSlice(extra).go}`,
        ),
      );
  }
  return [...errs, ...validateMetaCommon(meta)];
}

// ---- Service ------------------------------------------------------------------------------

const SERVICE_TYPES = ['ClusterIP', 'ExternalName', 'LoadBalancer', 'NodePort'];
const PROTOCOLS = ['SCTP', 'TCP', 'UDP'];
const AFFINITIES = ['ClientIP', 'None'];
const TRAFFIC_POLICIES = ['Cluster', 'Local'];

export function isHeadless(svc: Obj): boolean {
  return getPath(svc, 'spec', 'clusterIP') === 'None';
}

function goServicePortKey(protocol: string, port: number): string {
  return `core.ServicePort{Name:"", Protocol:${goQuote(protocol)}, AppProtocol:(*string)(nil), Port:${port}, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:""}, NodePort:0}`;
}

export function validateService(svc: Obj): FieldError[] {
  const errs = validateObjectMeta(record(svc['metadata']), serviceNameFn);
  errs.push(...validateServiceSpec(svc));
  return errs;
}

function validateServiceSpec(svc: Obj): FieldError[] {
  const errs: FieldError[] = [];
  const spec = record(svc['spec']);
  const type = str(spec['type']);
  const headless = isHeadless(svc);
  const ports = array(spec['ports']);

  if (headless && spec['sessionAffinity'] === 'ClientIP')
    errs.push(fieldInvalid('spec.sessionAffinity', 'ClientIP', 'must be None when spec.clusterIP is None'));

  if (type === 'ExternalName') {
    if (str(spec['clusterIP']) !== '') errs.push(fieldForbidden('spec.clusterIPs', 'may not be set for `type=ExternalName`'));
    const externalName = str(spec['externalName']);
    if (externalName === '') errs.push(fieldRequired('spec.externalName'));
    else
      for (const msg of isDns1123Subdomain(externalName.replace(/\.$/, '')))
        errs.push(fieldInvalid('spec.externalName', externalName, msg));
  }

  if (ports.length === 0 && !headless && type !== 'ExternalName') errs.push(fieldRequired('spec.ports'));

  const names = new Set<string>();
  ports.forEach((raw, i) => {
    const sp = record(raw);
    const path = `spec.ports[${i}]`;
    const name = str(sp['name']);
    if (ports.length > 1 && name === '') errs.push(fieldRequired(`${path}.name`));
    else if (name !== '') {
      for (const msg of isDns1123Label(name)) errs.push(fieldInvalid(`${path}.name`, name, msg));
      if (names.has(name)) errs.push(fieldDuplicate(`${path}.name`, name));
      else names.add(name);
    }
    const port = typeof sp['port'] === 'number' ? sp['port'] : 0;
    for (const msg of isValidPortNum(port)) errs.push(fieldInvalid(`${path}.port`, port, msg));
    const protocol = str(sp['protocol']);
    if (protocol === '') errs.push(fieldRequired(`${path}.protocol`));
    else if (!PROTOCOLS.includes(protocol)) errs.push(fieldNotSupported(`${path}.protocol`, protocol, PROTOCOLS));
    errs.push(...validatePortNumOrName(sp['targetPort'], `${path}.targetPort`));
    if (typeof sp['appProtocol'] === 'string')
      for (const msg of isQualifiedName(sp['appProtocol'])) errs.push(fieldInvalid(`${path}.appProtocol`, sp['appProtocol'], msg));
    if (type === 'ClusterIP' && typeof sp['nodePort'] === 'number' && sp['nodePort'] !== 0)
      errs.push(fieldForbidden(`${path}.nodePort`, "may not be used when `type` is 'ClusterIP'"));
    if (typeof sp['nodePort'] === 'number' && sp['nodePort'] !== 0)
      for (const msg of isValidPortNum(sp['nodePort'])) errs.push(fieldInvalid(`${path}.nodePort`, sp['nodePort'], msg));
  });

  if (spec['selector'] !== undefined) errs.push(...validateLabels(stringMap(spec['selector']), 'spec.selector'));

  const affinity = str(spec['sessionAffinity']);
  if (affinity === '') errs.push(fieldRequired('spec.sessionAffinity'));
  else if (!AFFINITIES.includes(affinity)) errs.push(fieldNotSupported('spec.sessionAffinity', affinity, AFFINITIES));

  if (type === '') errs.push(fieldRequired('spec.type'));
  else if (!SERVICE_TYPES.includes(type)) errs.push(fieldNotSupported('spec.type', type, SERVICE_TYPES));

  const seen = new Set<string>();
  ports.forEach((raw, i) => {
    const sp = record(raw);
    const port = typeof sp['port'] === 'number' ? sp['port'] : 0;
    const key = `${str(sp['protocol'])}/${port}`;
    if (seen.has(key)) errs.push(fieldDuplicate(`spec.ports[${i}]`, { go: goServicePortKey(str(sp['protocol']), port) }));
    seen.add(key);
  });

  const clusterIP = str(spec['clusterIP']);
  if (clusterIP !== '' && clusterIP !== 'None' && !isIPv4(clusterIP))
    errs.push(fieldInvalid('spec.clusterIPs[0]', clusterIP, 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'));

  const itp = spec['internalTrafficPolicy'];
  if (typeof itp === 'string' && !TRAFFIC_POLICIES.includes(itp))
    errs.push(fieldNotSupported('spec.internalTrafficPolicy', itp, TRAFFIC_POLICIES));
  const etp = spec['externalTrafficPolicy'];
  if (typeof etp === 'string' && etp !== '') {
    if (!externallyAccessible(spec))
      errs.push(fieldInvalid('spec.externalTrafficPolicy', etp, 'may only be set for externally-accessible services'));
    else if (!TRAFFIC_POLICIES.includes(etp)) errs.push(fieldNotSupported('spec.externalTrafficPolicy', etp, TRAFFIC_POLICIES));
  }
  return errs;
}

function validatePortNumOrName(value: unknown, field: string): FieldError[] {
  if (typeof value === 'number') return isValidPortNum(value).map((msg) => fieldInvalid(field, value, msg));
  if (typeof value === 'string') return isValidPortName(value).map((msg) => fieldInvalid(field, value, msg));
  return [];
}

/** ValidateServiceUpdate: metadata rules, clusterIPs immutability, then the create rules. */
export function validateServiceUpdate(svc: Obj, old: Obj): FieldError[] {
  const errs = validateObjectMetaUpdate(record(svc['metadata']), record(old['metadata']));
  const newType = getPath(svc, 'spec', 'type');
  const oldType = getPath(old, 'spec', 'type');
  if (newType !== 'ExternalName' && oldType !== 'ExternalName' && !(isHeadless(svc) && isHeadless(old))) {
    const oldIPs = array(getPath(old, 'spec', 'clusterIPs')).map(str);
    const newIPs = array(getPath(svc, 'spec', 'clusterIPs')).map(str);
    if (oldIPs.length === newIPs.length) {
      oldIPs.forEach((ip, i) => {
        if (ip !== newIPs[i]) errs.push(fieldInvalid(`spec.clusterIPs[${i}]`, goStringSlice(newIPs), 'may not change once set'));
      });
    } else if (newIPs.length === 0) {
      errs.push(fieldInvalid('spec.clusterIPs[0]', goStringSlice(newIPs), 'primary clusterIP can not be unset'));
    }
  }
  errs.push(...validateServiceSpec(svc));
  return errs;
}

// ---- Pod ----------------------------------------------------------------------------------

const RESTART_POLICIES = ['Always', 'OnFailure', 'Never'];
const DNS_POLICIES = ['ClusterFirst', 'ClusterFirstWithHostNet', 'Default', 'None'];
const PULL_POLICIES = ['Always', 'IfNotPresent', 'Never'];

export function validatePod(pod: Obj): FieldError[] {
  const errs = validateObjectMeta(record(pod['metadata']), podNameFn);
  errs.push(...validatePodSpec(record(pod['spec'])));
  return errs;
}

function validatePodSpec(spec: Obj): FieldError[] {
  const errs: FieldError[] = [];
  const containerNames = new Set<string>();
  const validateContainers = (list: unknown[], path: string): void => {
    list.forEach((raw, i) => {
      const c = record(raw);
      const p = `${path}[${i}]`;
      const name = str(c['name']);
      if (name === '') errs.push(fieldRequired(`${p}.name`));
      else {
        for (const msg of isDns1123Label(name)) errs.push(fieldInvalid(`${p}.name`, name, msg));
        if (containerNames.has(name)) errs.push(fieldDuplicate(`${p}.name`, name));
        containerNames.add(name);
      }
      if (str(c['image']) === '') errs.push(fieldRequired(`${p}.image`));
      const portNames = new Set<string>();
      array(c['ports']).forEach((rawPort, j) => {
        const port = record(rawPort);
        const pp = `${p}.ports[${j}]`;
        const portName = str(port['name']);
        if (portName !== '') {
          for (const msg of isValidPortName(portName)) errs.push(fieldInvalid(`${pp}.name`, portName, msg));
          if (portNames.has(portName)) errs.push(fieldDuplicate(`${pp}.name`, portName));
          portNames.add(portName);
        }
        const cp = typeof port['containerPort'] === 'number' ? port['containerPort'] : 0;
        if (cp === 0) errs.push(fieldRequired(`${pp}.containerPort`));
        else for (const msg of isValidPortNum(cp)) errs.push(fieldInvalid(`${pp}.containerPort`, cp, msg));
        const protocol = str(port['protocol']);
        if (protocol === '') errs.push(fieldRequired(`${pp}.protocol`));
        else if (!PROTOCOLS.includes(protocol)) errs.push(fieldNotSupported(`${pp}.protocol`, protocol, PROTOCOLS));
      });
      const pull = str(c['imagePullPolicy']);
      if (pull === '') errs.push(fieldRequired(`${p}.imagePullPolicy`));
      else if (!PULL_POLICIES.includes(pull)) errs.push(fieldNotSupported(`${p}.imagePullPolicy`, pull, PULL_POLICIES));
    });
  };
  validateContainers(array(spec['initContainers']), 'spec.initContainers');
  const containers = array(spec['containers']);
  if (containers.length === 0) errs.push(fieldRequired('spec.containers'));
  validateContainers(containers, 'spec.containers');

  const restart = str(spec['restartPolicy']);
  if (!RESTART_POLICIES.includes(restart)) errs.push(fieldNotSupported('spec.restartPolicy', restart, RESTART_POLICIES));
  const dns = str(spec['dnsPolicy']);
  if (!DNS_POLICIES.includes(dns)) errs.push(fieldNotSupported('spec.dnsPolicy', dns, DNS_POLICIES));
  if (spec['nodeSelector'] !== undefined) errs.push(...validateLabels(stringMap(spec['nodeSelector']), 'spec.nodeSelector'));
  return errs;
}

const POD_UPDATE_FORBIDDEN =
  'pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)';

/** ValidatePodUpdate: metadata rules, then only the mutable spec fields may differ. */
export function validatePodUpdate(pod: Obj, old: Obj): FieldError[] {
  const errs = validateObjectMetaUpdate(record(pod['metadata']), record(old['metadata']));
  const newSpec = record(pod['spec']);
  const oldSpec = record(old['spec']);
  const oldTolerations = array(oldSpec['tolerations']);
  const newTolerations = array(newSpec['tolerations']);
  const onlyAdditions = oldTolerations.every((t) => newTolerations.some((n) => deepEqual(n, t)));
  const strip = (spec: Obj): Obj => {
    const copy: Obj = { ...spec };
    for (const key of ['containers', 'initContainers'])
      if (Array.isArray(copy[key])) copy[key] = (copy[key] as unknown[]).map((c) => (isRecord(c) ? { ...c, image: '' } : c));
    delete copy['activeDeadlineSeconds'];
    delete copy['tolerations'];
    return copy;
  };
  if (!deepEqual(strip(newSpec), strip(oldSpec)) || !onlyAdditions) errs.push(fieldForbidden('spec', POD_UPDATE_FORBIDDEN));
  errs.push(...validatePodSpec(newSpec));
  return errs;
}
