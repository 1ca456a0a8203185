/**
 * Everything of the Kubernetes side that loads @kubernetes/client-node, behind one module that
 * the session (`session.ts`) imports only once credentials may exist: a host without a cluster
 * connection (and every `--sim` try-out) never pays for it (~60 MiB of RSS, ~150 ms of startup).
 */
export { createKubeClients, createNodeClients } from './client.js';
export { createNodeDrainer } from './drain.js';
export { createMachineApi } from './machine.js';
export { createMachineWatch } from './watch.js';
export { getNodeHealth } from './node-health.js';
export { createNodeWatch } from './node-watch.js';
export { createReflector } from './reflector.js';
export { createEventClients, createEventSink } from './event-sink.js';
export { createEventRecorder } from './event-recorder.js';
export { MACHINE_VERSION } from './schemas.js';
