/**
 * This node's Node object, as the reflector (src/kube/reflector.ts) follows it: a list+watch of
 * its name (a field selector, as kubelet's own informer does). What agentd shows of it is
 * whether it is cordoned (`spec.unschedulable`), so that a `kubectl cordon` or `uncordon` behind
 * agentd's back shows in `status` when it happens (src/kube/session.ts, `followCordon`).
 */
import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import * as z from 'zod';
import { BARE_TRANSPORT, type KubeTransport } from './connection-pool.js';
import type { ReflectorSource } from './reflector.js';
import { parseKubeObject } from './schemas.js';

/** What agentd reads of a Node. */
export interface NodeRecord {
  name: string;
  resourceVersion: string;
  /** `spec.unschedulable`: the node is cordoned. */
  unschedulable: boolean;
}

const nodeSchema = z.looseObject({
  metadata: z.looseObject({ name: z.string().min(1), resourceVersion: z.string().min(1) }),
  spec: z.looseObject({ unschedulable: z.boolean().nullish() }).nullish(),
});

function toNode(value: unknown): NodeRecord {
  const n = parseKubeObject(nodeSchema, 'Node', value);
  return {
    name: n.metadata.name,
    resourceVersion: n.metadata.resourceVersion,
    unschedulable: n.spec?.unschedulable === true,
  };
}

export interface NodeWatch {
  /** The list+watch of the Node `name`. */
  source(name: string): ReflectorSource<NodeRecord>;
}

export function createNodeWatch(o: {
  kc: KubeConfig;
  core: CoreV1Api;
  transport?: KubeTransport;
}): NodeWatch {
  return {
    source: (name) => {
      const fieldSelector = `metadata.name=${name}`;
      return {
        what: `Node ${name}`,
        async list() {
          const list = await o.core.listNode({ fieldSelector });
          return {
            items: list.items,
            resourceVersion: list.metadata?.resourceVersion,
            target: {
              kc: o.kc,
              transport: o.transport ?? BARE_TRANSPORT,
              path: '/api/v1/nodes',
              query: { fieldSelector },
            },
          };
        },
        decode: toNode,
      };
    },
  };
}
