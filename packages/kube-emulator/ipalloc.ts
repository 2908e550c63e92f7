/**
 * ClusterIP and NodePort allocation, as the apiserver's allocators do it for a
 * single-stack IPv4 cluster with kubeadm defaults (service CIDR 10.96.0.0/12,
 * node ports 30000-32767). Allocation is sequential instead of random (README).
 */

export const SERVICE_CIDR = '10.96.0.0/12';
const BASE = ipToInt('10.96.0.0');
const SIZE = 2 ** 20;
/** The real allocator keeps the lower band for static IPs; dynamic picks start above it. */
const DYNAMIC_START = 257;
/** `kubernetes` (10.96.0.1) and kube-dns (10.96.0.10) hold these in every kubeadm cluster. */
const RESERVED = ['10.96.0.1', '10.96.0.10'];

export const NODE_PORT_RANGE = { min: 30000, max: 32767 } as const;

function ipToInt(ip: string): number {
  return ip.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
}

function intToIp(n: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');
}

export class ClusterIPAllocator {
  private readonly used = new Set<string>(RESERVED);
  private cursor = DYNAMIC_START;

  /** Returns an error text (for a field error) or undefined when `ip` is now held. */
  allocateSpecific(ip: string, dryRun: boolean): string | undefined {
    const offset = ipToInt(ip) - BASE;
    if (offset <= 0 || offset >= SIZE - 1) {
      return `failed to allocate IP ${ip}: the provided IP (${ip}) is not in the valid range. The range of valid IPs is ${SERVICE_CIDR}`;
    }
    if (this.used.has(ip)) return `failed to allocate IP ${ip}: provided IP is already allocated`;
    if (!dryRun) this.used.add(ip);
    return undefined;
  }

  allocateNext(dryRun: boolean): string {
    for (let tried = 0; tried < SIZE; tried++) {
      const offset = this.cursor;
      this.cursor = this.cursor + 1 >= SIZE - 1 ? 1 : this.cursor + 1;
      const ip = intToIp(BASE + offset);
      if (this.used.has(ip)) continue;
      if (dryRun) this.cursor = offset;
      else this.used.add(ip);
      return ip;
    }
    throw new Error('range is full');
  }

  release(ip: string): void {
    if (!RESERVED.includes(ip)) this.used.delete(ip);
  }
}

export class NodePortAllocator {
  private readonly used = new Set<number>();
  private cursor: number = NODE_PORT_RANGE.min;

  allocateSpecific(port: number, dryRun: boolean): string | undefined {
    if (port < NODE_PORT_RANGE.min || port > NODE_PORT_RANGE.max) {
      return `provided port is not in the valid range. The range of valid ports is ${NODE_PORT_RANGE.min}-${NODE_PORT_RANGE.max}`;
    }
    if (this.used.has(port)) return 'provided port is already allocated';
    if (!dryRun) this.used.add(port);
    return undefined;
  }

  allocateNext(dryRun: boolean): number {
    const span = NODE_PORT_RANGE.max - NODE_PORT_RANGE.min + 1;
    for (let tried = 0; tried < span; tried++) {
      const port = this.cursor;
      this.cursor = port >= NODE_PORT_RANGE.max ? NODE_PORT_RANGE.min : port + 1;
      if (this.used.has(port)) continue;
      if (dryRun) this.cursor = port;
      else this.used.add(port);
      return port;
    }
    throw new Error('range is full');
  }

  holds(port: number): boolean {
    return this.used.has(port);
  }

  release(port: number): void {
    this.used.delete(port);
  }
}
