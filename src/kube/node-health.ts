/**
 * What the health gate reads of this node's Node object (docs/fleet.md, "The health gate"): the `Ready`
 * condition and the kubelet version the kubelet reported in `status.nodeInfo`.
 */
import type { CoreV1Api } from '@kubernetes/client-node';
import * as z from 'zod';
import { toKubeError } from './api-errors.js';
import { parseKubeObject } from './schemas.js';

const nodeHealthSchema = z.looseObject({
  metadata: z.looseObject({ name: z.string().min(1) }),
  status: z
    .looseObject({
      conditions: z
        .array(
          z.looseObject({
            type: z.string(),
            status: z.string(),
            reason: z.string().nullish(),
            message: z.string().nullish(),
          }),
        )
        .nullish(),
      nodeInfo: z.looseObject({ kubeletVersion: z.string().nullish() }).nullish(),
    })
    .nullish(),
});

/** The Node as the health gate sees it. */
export interface NodeHealth {
  name: string;
  /** The `Ready` condition is `True`. */
  ready: boolean;
  /** The `Ready` condition as read (`True`, `False: KubeletNotReady: …`, or `no Ready condition`). */
  readyCondition: string;
  /** `status.nodeInfo.kubeletVersion` as reported (`v1.35.0`), or null when not reported yet. */
  kubeletVersion: string | null;
}

/** Reduce a Node object (already read) to what the gate needs; throws INVALID_CONFIG if it is not a Node. */
export function readNodeHealth(value: unknown): NodeHealth {
  const node = parseKubeObject(nodeHealthSchema, 'Node', value);
  const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
  const readyCondition = ready
    ? [ready.status, ready.reason, ready.message]
        .filter((p) => p !== null && p !== undefined && p !== '')
        .join(': ')
    : 'no Ready condition';
  return {
    name: node.metadata.name,
    ready: ready?.status === 'True',
    readyCondition,
    kubeletVersion: node.status?.nodeInfo?.kubeletVersion ?? null,
  };
}

/** GET the Node and read its health; a missing Node or an API failure is a KUBE_* error. */
export async function getNodeHealth(core: CoreV1Api, name: string): Promise<NodeHealth> {
  let raw: unknown;
  try {
    raw = await core.readNode({ name });
  } catch (err) {
    throw toKubeError(err, `read Node ${name}`, { object: `Node ${name}` });
  }
  return readNodeHealth(raw);
}
