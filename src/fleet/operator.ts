/**
 * An operator's pause and resume of the fleet (docs/fleet.md, "Pause, halt and resume"), run by
 * `agentctl fleet pause|resume` itself with the operator's own kubeconfig, never through a node's
 * agentd: a node's credentials may not edit the policy (deploy/rbac.yaml). The edit is
 * fleet-control.ts's, the one a node's `fleet.pause` makes (policy.yaml edited in place, the
 * resourceVersion read, retried on conflict); the status printed after it is the same view, read
 * once here (policyStateOf, readSlots) instead of from a node's watch.
 *
 * The operator's credentials stay in the operator's process: an exec plugin runs as the operator,
 * files the kubeconfig names are read as the operator, and nothing of them reaches agentd or its
 * log. This module loads the Kubernetes client: agentctl imports it only with import(), for these
 * two commands (.dependency-cruiser.cjs, rule cli-fleet-operator-lazy).
 */
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { AgentError, KubeUnavailableError, isAgentError } from '../errors.js';
import type { Clock } from '../host/types.js';
import {
  BARE_TRANSPORT,
  createFleetObjects,
  kubeStatusOf,
  makeApiClient,
  type FleetObjects,
  type KubeconfigSource,
  type OperatorKubeconfig,
} from '../kube/index.js';
import { createFleetControl, type FleetView } from './fleet-control.js';
import { createFleetState } from './fleet-state.js';
import { POLICY_CONFIGMAP, STATE_CONFIGMAP } from './policy.js';
import { policyStateOf } from './policy-watch.js';
import { readSlots } from './slot-view.js';

/** How agentctl finds the operator's kubeconfig (src/kube/kubeconfig.ts), for its one import of this module. */
export { loadOperatorKubeconfig } from '../kube/index.js';

export type OperatorAction = 'pause' | 'resume';

/** Which credentials an operator's command used (all safe to print: no secret in them). */
export interface OperatorCredentials {
  source: KubeconfigSource;
  files: string[];
  context: string;
  server: string;
}

/** The fleet as the operator's credentials read it, after the change. */
export interface OperatorFleetView extends FleetView {
  kubeconfig: OperatorCredentials;
}

export interface OperatorFleet {
  /** Set `paused: true` in the policy (creating the ConfigMap with only that when there is none). */
  pause(): Promise<OperatorFleetView>;
  /** Clear the recorded failures, then set `paused: false`; says how many failures were cleared. */
  resume(): Promise<{ status: OperatorFleetView; clearedFailures: number }>;
}

export interface OperatorFleetOptions {
  kubeconfig: OperatorKubeconfig;
  /** The fleet's namespace (agentd's --fleet-namespace; default agentd-system). */
  namespace: string;
  clock: Clock;
  /** Every request is aborted when this aborts (the command's --timeout). */
  signal?: AbortSignal;
}

/** The Role of deploy/rbac.yaml that has the operator's rights, and the group it is bound to. */
export const OPERATOR_ROLE = 'agentd-fleet-operator';
export const OPERATOR_GROUP = 'agentd:fleet-operators';

type Right = { verb: string; resource: string; name: string | null };

const describeRight = (r: Right, namespace: string): string =>
  `${r.verb} ${r.resource}${r.name === null ? '' : ` ${r.name}`} in namespace ${namespace}`;

/** What the API server said of a refused call (its Status message), or the error's own message. */
function serverWords(err: Error): string {
  return kubeStatusOf(err.cause)?.message ?? err.message;
}

/** What agentctl says of a change whose answer is lost (docs/errors.md, "agentctl errors"). */
const mayHaveTakenEffect = (action: OperatorAction, namespace: string): string =>
  `the ${action} may have taken effect all the same: see whether it did with: kubectl -n ${namespace} get configmap ${POLICY_CONFIGMAP} ${STATE_CONFIGMAP} -o yaml (or agentctl fleet status on a node); running it again is safe`;

/**
 * What an error of one API call becomes for an operator: a 403 names the right that is missing
 * and where deploy/ grants it; a 401 names the kubeconfig whose credentials were rejected; a
 * write without an answer may have been made all the same (`mayHaveStarted`, as agentctl says
 * of every change whose answer is lost: docs/errors.md).
 */
function forOperator(
  err: unknown,
  o: { action: OperatorAction; right: Right; write: boolean; creds: OperatorCredentials; namespace: string },
): unknown {
  if (!isAgentError(err)) return err;
  const where = `context ${o.creds.context} of ${o.creds.files.join(', ')}`;
  if (err.code === 'CANCELLED' && o.write) {
    // The command's deadline aborted the write: it may have reached the API server.
    return new AgentError('CANCELLED', `${err.message}; ${mayHaveTakenEffect(o.action, o.namespace)}`, {
      cause: err,
      data: { ...err.data, mayHaveStarted: true },
    });
  }
  if (err.code !== 'KUBE_UNAVAILABLE') return err;
  const reason = err.data.reason;
  if (reason === 'Forbidden') {
    const right = describeRight(o.right, o.namespace);
    return new KubeUnavailableError(
      `fleet ${o.action}: the credentials of ${where} may not ${right} (the API server: ${serverWords(err)}); ` +
        `${o.action} needs the rights of the Role ${OPERATOR_ROLE} in ${o.namespace} (deploy/rbac.yaml), bound to the group ${OPERATOR_GROUP}: ` +
        `use a kubeconfig of a member of that group, or have an admin bind the Role to you (kubectl -n ${o.namespace} create rolebinding NAME --role ${OPERATOR_ROLE} --user YOU)`,
      {
        cause: err,
        data: {
          ...err.data,
          reason: 'Forbidden',
          right,
          verb: o.right.verb,
          resource: o.right.resource,
          ...(o.right.name === null ? {} : { name: o.right.name }),
          namespace: o.namespace,
          context: o.creds.context,
        },
      },
    );
  }
  if (reason === 'Unauthorized') {
    return new KubeUnavailableError(
      `fleet ${o.action}: the API server ${o.creds.server} rejected the credentials of ${where} (401 Unauthorized): they may have expired or been revoked; get a fresh kubeconfig`,
      { cause: err, data: { ...err.data, context: o.creds.context } },
    );
  }
  if (reason === 'Unreachable' && o.write) {
    return new KubeUnavailableError(
      `${err.message} (${o.creds.server}, ${where}); ${mayHaveTakenEffect(o.action, o.namespace)}`,
      { cause: err, data: { ...err.data, mayHaveStarted: true } },
    );
  }
  if (reason === 'Unreachable') {
    return new KubeUnavailableError(`${err.message} (${o.creds.server}, ${where})`, {
      cause: err,
      data: err.data,
    });
  }
  return err;
}

/** The fleet objects of `objects`, each call's errors said for an operator (forOperator). */
function operatorObjects(
  objects: FleetObjects,
  action: OperatorAction,
  creds: OperatorCredentials,
): Pick<FleetObjects, 'getConfigMap' | 'createConfigMap' | 'replaceConfigMap' | 'listLeases' | 'namespace'> {
  const namespace = objects.namespace;
  const guard = <T>(right: Right, write: boolean, call: () => Promise<T>): Promise<T> =>
    call().catch((err: unknown) => {
      throw forOperator(err, { action, right, write, creds, namespace });
    });
  return {
    namespace,
    getConfigMap: (name) =>
      guard({ verb: 'get', resource: 'configmaps', name }, false, () => objects.getConfigMap(name)),
    // A create cannot be granted by name (RBAC): the right is on every ConfigMap of the namespace.
    createConfigMap: (name, data) =>
      guard({ verb: 'create', resource: 'configmaps', name: null }, true, () =>
        objects.createConfigMap(name, data),
      ),
    replaceConfigMap: (name, rv, data) =>
      guard({ verb: 'update', resource: 'configmaps', name }, true, () =>
        objects.replaceConfigMap(name, rv, data),
      ),
    listLeases: () =>
      guard({ verb: 'list', resource: 'leases.coordination.k8s.io', name: null }, false, () =>
        objects.listLeases(),
      ),
  };
}

export function createOperatorFleet(o: OperatorFleetOptions): OperatorFleet {
  const { kc } = o.kubeconfig;
  // One request at a time, one command: no rate limit and no kept connections to share; the
  // command's deadline aborts whatever is under way.
  const transport = { ...BARE_TRANSPORT, ...(o.signal ? { signal: o.signal } : {}) };
  const base = createFleetObjects({
    kc,
    core: makeApiClient(kc, transport, CoreV1Api),
    coordination: makeApiClient(kc, transport, CoordinationV1Api),
    namespace: o.namespace,
    transport,
  });
  const creds: OperatorCredentials = {
    source: o.kubeconfig.source,
    files: o.kubeconfig.files,
    context: o.kubeconfig.context,
    server: o.kubeconfig.server,
  };
  const controlFor = (action: OperatorAction) => {
    const objects = operatorObjects(base, action, creds);
    return createFleetControl({
      objects,
      // Read once for each status: what the API holds right after the change.
      policyState: async () => {
        try {
          return policyStateOf(await objects.getConfigMap(POLICY_CONFIGMAP), null);
        } catch (err) {
          // The change is made: say what could not be read instead of failing the command.
          return {
            synced: false,
            present: false,
            policy: null,
            error: err instanceof Error ? err.message : String(err),
            errorField: null,
            resourceVersion: null,
          };
        }
      },
      state: createFleetState({ objects, clock: o.clock }),
      slots: () => readSlots(objects, o.clock),
      about: { kubeconfig: creds },
      // Errors of the writes are already said for an operator (operatorObjects).
      refused: (err) => err,
      clock: o.clock,
    });
  };
  return {
    pause: () => controlFor('pause').pause(),
    resume: () => controlFor('resume').resume(),
  };
}
