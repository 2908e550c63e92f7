import { createHash } from 'node:crypto';

/**
 * The Service name for an executor. The executor computes the same name from its own
 * environment (SPARK_APPLICATION_ID, SPARK_EXECUTOR_ID) in a POSIX shell, so every step
 * here is one that `tr`, `cut` and `sha256sum` reproduce byte for byte (C locale).
 *
 * Rule (docs/naming.md):
 *  1. candidate = "svc-" + appId + "-exec-" + execId   (Spark's own SPARK-52505 name)
 *  2. if candidate is a DNS-1035 label (^[a-z]([-a-z0-9]*[a-z0-9])?$, <= 63 bytes): use it.
 *  3. otherwise: hash = first 10 hex digits of sha256(appId + "/" + execId)
 *     ("/" cannot occur in a label value, so the hash input is unambiguous);
 *     body = appId + "-exec-" + execId, lower-cased (ASCII A-Z only), every byte outside
 *     [a-z0-9] turned into "-", runs of "-" squeezed to one, leading/trailing "-" removed,
 *     cut to 47 bytes, trailing "-" removed again;
 *     name = "svc-" + body + "-h" + hash, or "svc-h" + hash when body is empty (<= 63 bytes).
 *
 * Injective over the inputs Spark produces (app id a label value, exec id a decimal integer
 * >= 1, see spark-pod.ts): a plain name splits back at its last "-exec-" (the exec id has no
 * "-"), and its last segment is all digits, while a fallback's last segment starts with "h".
 * Two fallbacks can only meet on a 40-bit SHA-256 prefix collision; and if one ever did, the
 * identity recorded on the Service keeps the second executor from taking the first one's.
 */

export const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
export const DNS1035_LABEL_MAX = 63;
const FALLBACK_BODY_MAX = 47;
const HASH_HEX_DIGITS = 10;

export function isDns1035Label(name: string): boolean {
  return Buffer.byteLength(name, 'utf8') <= DNS1035_LABEL_MAX && DNS1035_LABEL.test(name);
}

export function executorServiceName(appId: string, execId: string): string {
  const candidate = `svc-${appId}-exec-${execId}`;
  if (isDns1035Label(candidate)) return candidate;
  const hash = createHash('sha256').update(`${appId}/${execId}`, 'utf8').digest('hex').slice(0, HASH_HEX_DIGITS);
  const body = sanitizeBytes(`${appId}-exec-${execId}`);
  return body === '' ? `svc-h${hash}` : `svc-${body}-h${hash}`;
}

/** Byte-wise like `LC_ALL=C tr 'A-Z' 'a-z' | tr -c 'a-z0-9' '-' | tr -s '-'`, then trim, cut, trim. */
function sanitizeBytes(value: string): string {
  const bytes = Buffer.from(value, 'utf8');
  let out = '';
  for (const byte of bytes) {
    const lower = byte >= 0x41 && byte <= 0x5a ? byte + 0x20 : byte;
    const keep = (lower >= 0x61 && lower <= 0x7a) || (lower >= 0x30 && lower <= 0x39);
    const ch = keep ? String.fromCharCode(lower) : '-';
    if (ch === '-' && out.endsWith('-')) continue;
    out += ch;
  }
  return trimDashes(trimDashes(out).slice(0, FALLBACK_BODY_MAX));
}

function trimDashes(value: string): string {
  return value.replace(/^-+/, '').replace(/-+$/, '');
}
