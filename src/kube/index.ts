/** The Kubernetes side of agentd: client factory, Machine CR, node cordon/drain, Machine watch. */
export { createKubeClients, SERVICE_ACCOUNT_DIR } from './client.js';
export { loadOperatorKubeconfig } from './kubeconfig.js';
export type { KubeconfigSource, OperatorKubeconfig, OperatorKubeconfigOptions } from './kubeconfig.js';
export type {
  CreateKubeClientsOptions,
  KubeClients,
  KubeClientsUnavailable,
  KubeCredentialSource,
} from './client.js';
export { buildMachineForConfig, createMachineApi } from './machine.js';
export type {
  ConflictRetryOptions,
  MachineApi,
  MachineApiOptions,
  MachineStatusMutation,
} from './machine.js';
export {
  LAST_OPERATION_CONDITION,
  NODE_RUNNING_CONDITION,
  buildStatusMergePatch,
  withCondition,
  withNodeUpdatedCondition,
} from './machine-status.js';
export type { ConditionUpdate, MachineStatusUpdate, StatusMergePatch } from './machine-status.js';
export {
  CORDONED_BY_AGENTD_ANNOTATION,
  cordonNode,
  createNodeDrainer,
  drainNode,
  uncordonNode,
} from './drain.js';
export type {
  CordonResult,
  DrainOptions,
  DrainResult,
  NodeDrainer,
  PodRef,
  PodWithReason,
  UncordonResult,
} from './drain.js';
export { createMachineWatch } from './watch.js';
export type { MachineWatch, MachineWatchOptions } from './watch.js';
export { createReflector, retryAfterMs, WATCH_ESTABLISHED_AFTER_MS } from './reflector.js';
export type { Listed, Reflector, ReflectorOptions, ReflectorSource, WatchTarget } from './reflector.js';
export { BARE_TRANSPORT, makeApiClient } from './connection-pool.js';
export type { KubeTransport } from './connection-pool.js';
export { isConflict, kubeStatusOf, toKubeError } from './api-errors.js';
export type { KubeStatus } from './api-errors.js';
export {
  DEFAULT_CRD_GROUP,
  MACHINE_PHASES,
  MACHINE_VERSION,
  NODE_UPDATED_CONDITION,
  machineSchema,
  parseKubeObject,
} from './schemas.js';
export type { Machine, MachineCondition, MachinePhase, MachineSpec, MachineStatus } from './schemas.js';
export { SLOT_LABEL, createFleetObjects, isAlreadyExists, isWriteConflict } from './fleet-objects.js';
export type {
  ConfigMapRecord,
  ConfigMapWatchEvent,
  FleetObjects,
  LeaseRecord,
  LeaseSpecWrite,
  LeaseWatchEvent,
} from './fleet-objects.js';
