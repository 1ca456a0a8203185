/**
 * This node's Node object, followed by a list+watch of its name (a field selector, as kubelet's
 * own informer does): what agentd shows of it is whether it is cordoned (`spec.unschedulable`),
 * so that a `kubectl cordon` or `uncordon` behind agentd's back shows in `status` when it happens.
 */
import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import * as z from 'zod';
import type { AgentError } from '../errors.js';
import { listThenWatch } from './list-watch.js';
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

/**
 * Follow the Node `name`: `onList` gets it as listed, `onEvent` at every change after that (null:
 * there is no such Node, or it was deleted); `onDone` is called once when the watch ends by itself
 * (null: the server closed it). Returns a function that stops the watch.
 */
export type WatchNode = (
  name: string,
  onList: (node: NodeRecord | null) => void,
  onEvent: (node: NodeRecord | null) => void,
  onDone: (err: AgentError | null) => void,
) => Promise<() => void>;

export function createNodeWatch(o: { kc: KubeConfig; core: CoreV1Api }): WatchNode {
  return (name, onList, onEvent, onDone) => {
    const fieldSelector = `metadata.name=${name}`;
    return listThenWatch(o.kc, {
      what: `Node ${name}`,
      list: () => o.core.listNode({ fieldSelector }),
      path: '/api/v1/nodes',
      query: { fieldSelector },
      onList: (items) => onList(items[0] === undefined ? null : toNode(items[0])),
      onChange: (type, object) => onEvent(type === 'DELETED' ? null : toNode(object)),
      onDone,
    });
  };
}
