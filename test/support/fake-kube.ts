/**
 * The fake Kubernetes API server for tests: `const kube = await startFakeKube()`, drive it with
 * the real client (`kube.kubeConfig()`), seed and inspect state with its helpers, `await kube.close()`.
 */
export { FakeKube, startFakeKube, startFakeKube as start } from './fake-kube/server.js';
export type { FakeKubeOptions } from './fake-kube/server.js';
export { MACHINE_GROUPS, MACHINE_VERSION } from './fake-kube/resources.js';
export type { MachineGroup } from './fake-kube/resources.js';
export type { NodeSeed, NodeStatusSeed, PdbSeed, PodOwnerSeed, PodSeed } from './fake-kube/seeds.js';
export type {
  FakeRole,
  FakeRule,
  Json,
  KubeObject,
  RequestInfo,
  RequestMatcher,
  RequestRecord,
} from './fake-kube/types.js';
export { createTestClock } from './fake-kube/test-clock.js';
export type { TestClock } from './fake-kube/test-clock.js';
