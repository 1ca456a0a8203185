/**
 * Cordon and uncordon that remember who cordoned: agentd marks the nodes it cordons with an
 * annotation, so it later undoes only its own cordon and never an administrator's.
 */
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { CoreV1Api } from '@kubernetes/client-node';
import { KubeConflictError } from '../errors.js';
import { isConflict, toKubeError } from './api-errors.js';
import { nodeSchema, parseKubeObject } from './schemas.js';
import type { KubeNode } from './schemas.js';

/** Set (to `"true"`) on a node while it is cordoned because agentd cordoned it. */
export const CORDONED_BY_AGENTD_ANNOTATION = 'agentd.unbounded-cloud.io/cordoned-by-agentd';

const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
// A node patch conflicts only with a concurrent writer of the same node; a few re-reads settle it.
const ATTEMPTS = 5;

export interface CordonResult {
  /** The node was unschedulable before (then agentd changed nothing and will not uncordon it). */
  alreadyCordoned: boolean;
}

export interface UncordonResult {
  /** The node was made schedulable by this call. */
  uncordoned: boolean;
  /**
   * `uncordoned`: agentd's cordon was undone; `not-cordoned`: the node was schedulable;
   * `cordoned-by-other`: someone else cordoned it, so it stays cordoned.
   */
  outcome: 'uncordoned' | 'not-cordoned' | 'cordoned-by-other';
}

async function readNode(core: CoreV1Api, name: string): Promise<KubeNode> {
  try {
    return parseKubeObject(nodeSchema, 'Node', await core.readNode({ name }));
  } catch (err) {
    throw toKubeError(err, `read Node ${name}`, { object: `Node ${name}` });
  }
}

/**
 * Patch with the read resourceVersion as precondition; on 409 re-read and decide again, because
 * the decision (whether the cordon is ours) depends on the state we read.
 */
async function patchDecided<T>(
  core: CoreV1Api,
  name: string,
  what: string,
  decide: (node: KubeNode) => { patch: Record<string, unknown> | null; result: T },
): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    const node = await readNode(core, name);
    const { patch, result } = decide(node);
    if (patch === null) return result;
    const body = {
      ...patch,
      metadata: { ...(patch.metadata as object), resourceVersion: node.metadata.resourceVersion },
    };
    try {
      await core.patchNode({ name, body }, MERGE_PATCH);
      return result;
    } catch (err) {
      if (!isConflict(err)) throw toKubeError(err, `${what} Node ${name}`, { object: `Node ${name}` });
      if (attempt >= ATTEMPTS) {
        throw new KubeConflictError(`${what} Node ${name}: still conflicting after ${ATTEMPTS} attempts`, {
          cause: err,
        });
      }
    }
  }
}

/** Mark the node unschedulable; records that agentd did it only when it was schedulable before. */
export function cordonNode(core: CoreV1Api, name: string): Promise<CordonResult> {
  return patchDecided<CordonResult>(core, name, 'cordon', (node) =>
    node.spec?.unschedulable
      ? { patch: null, result: { alreadyCordoned: true } }
      : {
          patch: {
            spec: { unschedulable: true },
            metadata: { annotations: { [CORDONED_BY_AGENTD_ANNOTATION]: 'true' } },
          },
          result: { alreadyCordoned: false },
        },
  );
}

/**
 * Undo agentd's cordon. A cordon agentd did not make stays, unless `force` (an operator's
 * explicit `agentctl uncordon`). A stale marker on a schedulable node is removed.
 */
export function uncordonNode(
  core: CoreV1Api,
  name: string,
  options: { force?: boolean } = {},
): Promise<UncordonResult> {
  return patchDecided(
    core,
    name,
    'uncordon',
    (node): { patch: Record<string, unknown> | null; result: UncordonResult } => {
      const ours = node.metadata.annotations?.[CORDONED_BY_AGENTD_ANNOTATION] === 'true';
      const cordoned = node.spec?.unschedulable === true;
      const clearMarker = ours
        ? { metadata: { annotations: { [CORDONED_BY_AGENTD_ANNOTATION]: null } } }
        : { metadata: {} };
      if (cordoned && (ours || options.force)) {
        return {
          patch: { ...clearMarker, spec: { unschedulable: null } },
          result: { uncordoned: true, outcome: 'uncordoned' },
        };
      }
      const result: UncordonResult = {
        uncordoned: false,
        outcome: cordoned ? 'cordoned-by-other' : 'not-cordoned',
      };
      return { patch: ours ? clearMarker : null, result };
    },
  );
}
