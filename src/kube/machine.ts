/**
 * Reading, self-registering and status-patching the node's Machine custom resource.
 * Status writes are merge patches on the status subresource with the fresh resourceVersion as a
 * precondition, retried from a fresh read on conflict with capped backoff.
 */
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { CustomObjectsApi } from '@kubernetes/client-node';
import type { AgentConfig } from '../config/agent-config.js';
import { CancelledError, KubeConflictError, NotFoundError, PreconditionFailedError } from '../errors.js';
import { systemClock } from '../host/clock.js';
import type { Clock } from '../host/types.js';
import { CONFLICT_BACKOFF, backoffDelay, sleepOrCancel } from '../retry/backoff.js';
import { isConflict, isObjectNotFound, kubeStatusOf, toKubeError } from './api-errors.js';
import { buildStatusMergePatch } from './machine-status.js';
import type { MachineStatusUpdate } from './machine-status.js';
import {
  DEFAULT_CRD_GROUP,
  MACHINE_KIND,
  MACHINE_PLURAL,
  MACHINE_VERSION,
  machineSchema,
  parseKubeObject,
} from './schemas.js';
import type { Machine } from './schemas.js';

const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export interface ConflictRetryOptions {
  /** Attempts in all, the first included (default 5). */
  attempts?: number;
  /** Wait before the second attempt; doubles each time, jittered (default 100 ms). */
  baseDelayMs?: number;
  /** Cap of the wait between attempts (default 2000 ms). */
  maxDelayMs?: number;
}

export interface MachineApiOptions {
  custom: CustomObjectsApi;
  /** API group of the Machine CRD (default `unbounded-cloud.io`). */
  group?: string;
  clock?: Clock;
  conflictRetry?: ConflictRetryOptions;
}

/** Decides the status change from the freshly read Machine; `null` means "nothing to write". */
export type MachineStatusMutation = (fresh: Machine) => MachineStatusUpdate | null;

/** The Machine operations agentd needs, bound to one client and CRD group. */
export interface MachineApi {
  readonly group: string;
  /** The Machine, or `null` when it does not exist. */
  getMachine(name: string): Promise<Machine | null>;
  /**
   * The Machine as a list of one (a field selector on its name), with the list's resourceVersion:
   * where a watch of it starts. Not the Machine's own resourceVersion, which is as old as its last
   * change: kube-apiserver's watch cache refuses a version older than its window with 410 Gone (at
   * once after a restart), so a watch from it would never start.
   */
  listMachine(name: string): Promise<{ machine: Machine | null; resourceVersion: string | undefined }>;
  /** Self-register: create the Machine for this node from its applied config. */
  createMachine(config: AgentConfig): Promise<Machine>;
  /** Get the node's Machine, creating it when missing (a concurrent create is not an error). */
  ensureMachine(config: AgentConfig): Promise<{ machine: Machine; created: boolean }>;
  /**
   * Merge-patch agentd's own status fields. `mutate` runs on every fresh read (so again after a
   * conflict); returns the Machine as written, or as read when `mutate` returned null. With
   * `base` (the Machine as the caller last saw it, e.g. from its watch) the first attempt starts
   * from it instead of a read: its resourceVersion is the precondition, so a stale base costs a
   * conflict and a fresh read, never a lost write.
   */
  patchMachineStatus(
    name: string,
    mutate: MachineStatusMutation,
    options?: { signal?: AbortSignal; base?: Machine },
  ): Promise<Machine>;
}

/** The Machine a node registers itself with (docs/compatibility.md, "Self-registration"). */
export function buildMachineForConfig(
  config: AgentConfig,
  group: string = DEFAULT_CRD_GROUP,
): Record<string, unknown> {
  const token = config.Kubelet.Auth.BootstrapToken;
  if (token === undefined) {
    throw new PreconditionFailedError(
      `self-registration of Machine ${config.MachineName} needs Kubelet.Auth.BootstrapToken (for spec.kubernetes.bootstrapTokenRef), but the applied config uses ExecCredential`,
      { data: { machine: config.MachineName } },
    );
  }
  const kubernetes: Record<string, unknown> = {
    version: `v${config.Cluster.Version}`,
    bootstrapTokenRef: { name: `bootstrap-token-${token.split('.')[0] ?? ''}` },
  };
  if (Object.keys(config.Kubelet.Labels).length > 0) kubernetes.nodeLabels = { ...config.Kubelet.Labels };
  if (config.Kubelet.RegisterWithTaints.length > 0)
    kubernetes.registerWithTaints = [...config.Kubelet.RegisterWithTaints];
  return {
    apiVersion: `${group}/${MACHINE_VERSION}`,
    kind: MACHINE_KIND,
    metadata: { name: config.MachineName },
    spec: { kubernetes },
  };
}

export function createMachineApi(options: MachineApiOptions): MachineApi {
  const { custom } = options;
  const group = options.group ?? DEFAULT_CRD_GROUP;
  const clock = options.clock ?? systemClock;
  const attempts = Math.max(1, options.conflictRetry?.attempts ?? 5);
  const conflictBackoff = {
    baseMs: options.conflictRetry?.baseDelayMs ?? CONFLICT_BACKOFF.baseMs,
    maxMs: options.conflictRetry?.maxDelayMs ?? CONFLICT_BACKOFF.maxMs,
  };
  const resource = { group, version: MACHINE_VERSION, plural: MACHINE_PLURAL };
  const parse = (value: unknown): Machine => parseKubeObject(machineSchema, MACHINE_KIND, value);

  async function getMachine(name: string): Promise<Machine | null> {
    let raw: unknown;
    try {
      raw = await custom.getClusterCustomObject({ ...resource, name });
    } catch (err) {
      if (isObjectNotFound(kubeStatusOf(err))) return null;
      throw toKubeError(err, `get Machine ${name}`, { crdGroup: group, object: `Machine ${name}` });
    }
    return parse(raw);
  }

  async function listMachine(
    name: string,
  ): Promise<{ machine: Machine | null; resourceVersion: string | undefined }> {
    let raw: { items?: unknown[]; metadata?: { resourceVersion?: string } };
    try {
      raw = (await custom.listClusterCustomObject({
        ...resource,
        fieldSelector: `metadata.name=${name}`,
      })) as typeof raw;
    } catch (err) {
      throw toKubeError(err, `list Machine ${name}`, { crdGroup: group, object: `Machine ${name}` });
    }
    const item = (raw.items ?? []).find(
      (i) => (i as { metadata?: { name?: unknown } } | null)?.metadata?.name === name,
    );
    return {
      machine: item === undefined ? null : parse(item),
      resourceVersion: raw.metadata?.resourceVersion,
    };
  }

  async function createMachine(config: AgentConfig): Promise<Machine> {
    const body = buildMachineForConfig(config, group);
    try {
      return parse(await custom.createClusterCustomObject({ ...resource, body }));
    } catch (err) {
      throw toKubeError(err, `create Machine ${config.MachineName}`, { crdGroup: group });
    }
  }

  async function ensureMachine(config: AgentConfig): Promise<{ machine: Machine; created: boolean }> {
    const name = config.MachineName;
    const existing = await getMachine(name);
    if (existing) return { machine: existing, created: false };
    try {
      return { machine: await createMachine(config), created: true };
    } catch (err) {
      // Someone (an operator, another agentd start) created it between our GET and POST.
      if (err instanceof KubeConflictError && err.data.kubeReason === 'AlreadyExists') {
        const machine = await getMachine(name);
        if (machine) return { machine, created: false };
      }
      throw err;
    }
  }

  async function patchMachineStatus(
    name: string,
    mutate: MachineStatusMutation,
    opts: { signal?: AbortSignal; base?: Machine } = {},
  ): Promise<Machine> {
    const what = `patch Machine ${name} status`;
    for (let attempt = 1; ; attempt += 1) {
      if (opts.signal?.aborted) throw new CancelledError(what);
      const fresh =
        attempt === 1 && opts.base?.metadata.resourceVersion !== undefined
          ? opts.base
          : await getMachine(name);
      if (fresh === null) throw new NotFoundError(`Machine ${name}`, { data: { machine: name } });
      const update = mutate(fresh);
      if (update === null) return fresh;
      const body = buildStatusMergePatch(fresh, update, clock.now());
      try {
        return parse(await custom.patchClusterCustomObjectStatus({ ...resource, name, body }, MERGE_PATCH));
      } catch (err) {
        if (!isConflict(err)) throw toKubeError(err, what, { crdGroup: group, object: `Machine ${name}` });
        if (attempt >= attempts) {
          throw new KubeConflictError(
            `${what}: still conflicting with other writers after ${attempts} attempts (last resourceVersion read ${fresh.metadata.resourceVersion})`,
            { cause: err, data: { machine: name, attempts } },
          );
        }
      }
      // Another writer got in between our read and our patch: back off, re-read, re-apply.
      await sleepOrCancel(clock, backoffDelay(attempt, conflictBackoff), opts.signal, what);
    }
  }

  return { group, getMachine, listMachine, createMachine, ensureMachine, patchMachineStatus };
}
