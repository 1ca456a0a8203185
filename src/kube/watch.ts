/**
 * Where the Machine watcher's reflector (src/kube/reflector.ts) watches one Machine: the Machine
 * CRD's collection with a field selector on its name. The watcher lists it itself (the same
 * collection and selector, after self-registration): see src/watcher/watch-loop.ts.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { BARE_TRANSPORT, type KubeTransport } from './connection-pool.js';
import type { WatchTarget } from './reflector.js';
import { DEFAULT_CRD_GROUP, MACHINE_PLURAL, MACHINE_VERSION } from './schemas.js';

export interface MachineWatchOptions {
  kc: KubeConfig;
  /** API group of the Machine CRD (default `unbounded-cloud.io`). */
  group?: string;
  /** The rate limit and connection pool of the clients (default: none, a bare KubeConfig). */
  transport?: KubeTransport;
}

/** Where to watch a Machine by name. */
export interface MachineWatch {
  target(name: string): WatchTarget;
}

export function createMachineWatch(options: MachineWatchOptions): MachineWatch {
  const group = options.group ?? DEFAULT_CRD_GROUP;
  return {
    target: (name) => ({
      kc: options.kc,
      transport: options.transport ?? BARE_TRANSPORT,
      path: `/apis/${group}/${MACHINE_VERSION}/${MACHINE_PLURAL}`,
      query: { fieldSelector: `metadata.name=${name}` },
      crdGroup: group,
    }),
  };
}
