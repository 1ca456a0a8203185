/**
 * Everything of the Kubernetes side that loads @kubernetes/client-node, behind one module that
 * `kube-wiring.ts` imports only once credentials may exist: a host without a cluster connection
 * (and every `--sim` try-out) never pays for it (~60 MiB of RSS, ~150 ms of startup).
 */
export { createKubeClients, createMachineApi, createMachineWatch, createNodeDrainer } from '../kube/index.js';
export { createBlockedTargetFile, createMachineWatcher } from '../watcher/index.js';
export { getNodeHealth } from '../kube/node-health.js';
