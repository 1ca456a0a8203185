/**
 * A fake Kubernetes API server on 127.0.0.1 for tests driven by the real
 * `@kubernetes/client-node`: its state, and the test-side handles to seed, read and disturb it
 * (requests themselves go through `handle-request.ts`).
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { TokenAuth } from './auth.js';
import { Crud } from './crud.js';
import { Faults } from './faults.js';
import { validateMachine } from './machine-validation.js';
import { handleRequest } from './handle-request.js';
import type { LoggedRequest } from './handle-request.js';
import { CONFIGMAPS, LEASES, MACHINE_GROUPS, machineDef, NODES, PDBS, PODS } from './resources.js';
import { validateConfigMap, validateLease } from './lease-validation.js';
import type { MachineGroup } from './resources.js';
import type { RouterContext } from './router.js';
import { makeNode, makePdb, makePod, readyCondition } from './seeds.js';
import type { NodeSeed, NodeStatusSeed, PdbSeed, PodSeed } from './seeds.js';
import { ObjectStore } from './store.js';
import { matchRequest } from './types.js';
import type { FakeRole, Json, KubeObject, RequestInfo, RequestMatcher, RequestRecord } from './types.js';
import { WatchHub } from './watch-hub.js';

export interface FakeKubeOptions {
  /** The admin token (default: random). */
  token?: string;
  /** More tokens, e.g. a restricted role to provoke 403s. */
  tokens?: Record<string, FakeRole>;
  /** Which Machine CRD groups are installed (default: both). */
  crdInstalled?: Partial<Record<MachineGroup, boolean>>;
  /** How many write events watches can replay; older versions answer 410 (default 1000). */
  watchHistoryLimit?: number;
  /** Send BOOKMARK events this often (real ms) to watches that allow them; 0 = only on demand. */
  bookmarkIntervalMs?: number;
  /** How long an evicted or deleted pod stays terminating (real ms); 0 = gone at once. */
  podDeletionDelayMs?: number;
}

export class FakeKube {
  readonly url: string;
  readonly token: string;
  private readonly store: ObjectStore;
  private readonly crud: Crud;
  private readonly hub: WatchHub;
  private readonly auth = new TokenAuth();
  private readonly faults = new Faults();
  private readonly installedGroups: Set<MachineGroup>;
  private readonly log: LoggedRequest[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly ctx: RouterContext;
  private accepted = 0;

  /** Use `startFakeKube()`. */
  constructor(
    private readonly server: http.Server,
    options: FakeKubeOptions,
  ) {
    const address = server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${address.port}`;
    this.token = options.token ?? `admin-${randomBytes(12).toString('hex')}`;
    this.auth.set(this.token, 'admin');
    for (const [token, role] of Object.entries(options.tokens ?? {})) this.auth.set(token, role);
    this.store = new ObjectStore(options.watchHistoryLimit ?? 1000);
    this.crud = new Crud(
      this.store,
      new Map([
        ...MACHINE_GROUPS.map((g) => [machineDef(g).key, validateMachine] as const),
        [LEASES.key, validateLease] as const,
        [CONFIGMAPS.key, validateConfigMap] as const,
      ]),
    );
    this.hub = new WatchHub(this.store);
    this.installedGroups = new Set(MACHINE_GROUPS.filter((g) => options.crdInstalled?.[g] ?? true));
    this.ctx = {
      store: this.store,
      crud: this.crud,
      hub: this.hub,
      installedGroups: this.installedGroups,
      eviction: {
        podDeletionDelayMs: options.podDeletionDelayMs ?? 0,
        schedule: (ms, fn) => this.schedule(ms, fn),
      },
    };
    if (options.bookmarkIntervalMs) {
      const interval = setInterval(() => this.hub.sendBookmarks(), options.bookmarkIntervalMs);
      this.timers.add(interval);
    }
    const deps = { baseUrl: this.url, auth: this.auth, faults: this.faults, ctx: this.ctx, log: this.log };
    server.on('request', (req, res) => {
      void handleRequest(deps, req, res);
    });
    server.on('connection', () => {
      this.accepted += 1;
    });
  }

  // ---- clients ----------------------------------------------------------------------------

  /** A real client config for this server (plain HTTP needs `skipTLSVerify` in client-node). */
  kubeConfig(token: string = this.token): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'fake-user', token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'fake-user' }],
      currentContext: 'fake',
    });
    return kc;
  }

  /** The same as a kubeconfig file's text (for `--kubeconfig`). */
  kubeconfigYaml(token: string = this.token): string {
    return this.kubeConfig(token).exportConfig();
  }

  setToken(token: string, role: FakeRole): void {
    this.auth.set(token, role);
  }

  // ---- Machines -----------------------------------------------------------------------------

  /**
   * Create or replace a Machine directly (no subresource rules: `status` is stored as given).
   * uid and creationTimestamp are kept on replace; generation bumps when spec changes.
   */
  putMachine(
    machine: { metadata: { name: string } & Json; spec?: Json; status?: Json },
    group: MachineGroup = 'unbounded-cloud.io',
  ): KubeObject {
    const def = machineDef(group);
    const name = machine.metadata.name;
    const current = this.store.get(def.key, undefined, name);
    if (current === undefined) {
      const created = this.crud.create(def, undefined, { ...machine, status: undefined });
      if (machine.status === undefined) return created;
      return this.crud.update(def, undefined, name, { ...created, status: machine.status }, 'status');
    }
    const base = { ...current, ...machine, metadata: { ...current.metadata, ...machine.metadata } };
    const main = this.crud.update(def, undefined, name, base);
    return this.crud.update(def, undefined, name, { ...main, status: machine.status }, 'status');
  }

  getMachine(name: string, group: MachineGroup = 'unbounded-cloud.io'): KubeObject | undefined {
    return this.store.get(machineDef(group).key, undefined, name);
  }

  deleteMachine(name: string, group: MachineGroup = 'unbounded-cloud.io'): void {
    this.store.remove(machineDef(group).key, undefined, name);
  }

  /** Another controller merge-patches the status (e.g. `{phase: 'Ready'}`), bumping the resourceVersion. */
  patchMachineStatusAsOtherWriter(
    name: string,
    status: Json,
    group: MachineGroup = 'unbounded-cloud.io',
  ): KubeObject {
    return this.crud.patch(
      machineDef(group),
      undefined,
      name,
      { status },
      'application/merge-patch+json',
      'status',
    );
  }

  /** Someone edits the spec (a merge patch of `spec`): generation bumps. */
  patchMachineSpecAsOtherWriter(
    name: string,
    spec: Json,
    group: MachineGroup = 'unbounded-cloud.io',
  ): KubeObject {
    return this.crud.patch(machineDef(group), undefined, name, { spec }, 'application/merge-patch+json');
  }

  setCrdInstalled(group: MachineGroup, installed: boolean): void {
    if (installed) this.installedGroups.add(group);
    else this.installedGroups.delete(group);
  }

  // ---- ConfigMaps and Leases (the fleet gate) ----------------------------------------------------

  /** Create or replace a ConfigMap behind agentd's back (an operator's kubectl apply). */
  putConfigMap(namespace: string, name: string, data: Record<string, string>): KubeObject {
    const current = this.store.get(CONFIGMAPS.key, namespace, name);
    const body = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data };
    return current === undefined
      ? this.crud.create(CONFIGMAPS, namespace, body)
      : this.crud.update(CONFIGMAPS, namespace, name, body);
  }

  getConfigMap(namespace: string, name: string): KubeObject | undefined {
    return this.store.get(CONFIGMAPS.key, namespace, name);
  }

  deleteConfigMap(namespace: string, name: string): void {
    this.crud.delete(CONFIGMAPS, namespace, name);
  }

  getLease(namespace: string, name: string): KubeObject | undefined {
    return this.store.get(LEASES.key, namespace, name);
  }

  /** Create a Lease behind agentd's back (e.g. a slot an older agentd wrote, without the label). */
  putLease(namespace: string, body: KubeObject): KubeObject {
    return this.crud.create(LEASES, namespace, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      ...body,
      metadata: { ...body.metadata, namespace },
    });
  }

  listLeases(namespace: string): KubeObject[] {
    return this.store.list(LEASES.key, namespace);
  }

  // ---- Nodes, pods, PDBs ------------------------------------------------------------------------

  addNode(name: string, seed: NodeSeed = {}): KubeObject {
    return this.crud.create(NODES, undefined, makeNode(name, seed));
  }

  getNode(name: string): KubeObject | undefined {
    return this.store.get(NODES.key, undefined, name);
  }

  /** Delete a node (its watchers see DELETED). */
  deleteNode(name: string): void {
    this.store.remove(NODES.key, undefined, name);
  }

  /** Merge-patch a node behind agentd's back (e.g. an admin's cordon). */
  patchNode(name: string, patch: Json): KubeObject {
    return this.crud.patch(NODES, undefined, name, patch, 'application/merge-patch+json');
  }

  /**
   * Write a Node's status as its kubelet would: the `Ready` condition (other conditions kept) and
   * `nodeInfo.kubeletVersion`. A status change bumps the resourceVersion like any write.
   */
  setNodeStatus(name: string, seed: NodeStatusSeed): KubeObject {
    const node = this.getNode(name);
    if (!node) throw new Error(`fake kube: no Node ${name}`);
    const current = (node.status ?? {}) as { conditions?: Array<{ type: string }>; nodeInfo?: Json };
    const others = (current.conditions ?? []).filter((c) => c.type !== 'Ready');
    const nodeInfo =
      seed.kubeletVersion === undefined
        ? current.nodeInfo
        : { ...current.nodeInfo, kubeletVersion: seed.kubeletVersion };
    // Through the status subresource, as a kubelet writes it: the main resource ignores status.
    const status = {
      conditions: [...others, readyCondition(seed)],
      ...(nodeInfo === undefined ? {} : { nodeInfo }),
    };
    return this.crud.patch(NODES, undefined, name, { status }, 'application/merge-patch+json', 'status');
  }

  addPod(seed: PodSeed): KubeObject {
    const pod = makePod(seed);
    return this.crud.create(PODS, pod.metadata.namespace, pod);
  }

  getPod(namespace: string, name: string): KubeObject | undefined {
    return this.store.get(PODS.key, namespace, name);
  }

  /** Pods, optionally only those bound to `nodeName`. */
  listPods(nodeName?: string): KubeObject[] {
    return this.store.list(PODS.key).filter((p) => nodeName === undefined || p.spec?.nodeName === nodeName);
  }

  addPdb(seed: PdbSeed): KubeObject {
    const pdb = makePdb(seed);
    return this.crud.create(PDBS, pdb.metadata.namespace, pdb);
  }

  getPdb(namespace: string, name: string): KubeObject | undefined {
    return this.store.get(PDBS.key, namespace, name);
  }

  setPdbDisruptionsAllowed(namespace: string, name: string, disruptionsAllowed: number): KubeObject {
    return this.crud.patch(
      PDBS,
      namespace,
      name,
      { status: { disruptionsAllowed } },
      'application/merge-patch+json',
      'status',
    );
  }

  // ---- Watches ------------------------------------------------------------------------------

  /** The current (latest) resourceVersion. */
  get resourceVersion(): string {
    return String(this.store.currentRv);
  }

  /** Drop the event history: watches from any older resourceVersion now get 410 Gone. */
  compactHistory(): void {
    this.store.compact();
  }

  sendBookmarks(): void {
    this.hub.sendBookmarks();
  }

  /** Write `line` as it is to every open watch (a line the client cannot decode). */
  sendWatchLine(line: string): void {
    this.hub.sendRaw(line);
  }

  /** TCP connections accepted so far (a client that reuses its connections opens few). */
  get connectionsAccepted(): number {
    return this.accepted;
  }

  get openWatches(): number {
    return this.hub.openCount;
  }

  /** Resolves once at least `count` watch streams are open (so a test can write after the watch started). */
  whenWatching(count = 1): Promise<void> {
    return this.hub.whenOpen(count);
  }

  /** End every open watch stream now; returns how many were cut. */
  cutWatches(options: { abrupt?: boolean } = {}): number {
    return this.hub.cutAll(options.abrupt ?? false);
  }

  /** Cut all watch streams every `ms` (real time) until the returned function is called. */
  cutWatchesEvery(ms: number, options: { abrupt?: boolean } = {}): () => void {
    const interval = setInterval(() => this.hub.cutAll(options.abrupt ?? false), ms);
    this.timers.add(interval);
    return () => {
      clearInterval(interval);
      this.timers.delete(interval);
    };
  }

  // ---- Faults -------------------------------------------------------------------------------

  /** Answer the next `count` matching requests with 503 (or `status`). */
  failNext(
    count: number,
    options: { status?: number; match?: RequestMatcher; retryAfterSeconds?: number } = {},
  ): void {
    this.faults.failNext(count, options);
  }

  /** Delay matching requests by `ms` until the returned function is called. */
  delay(ms: number, match?: RequestMatcher): () => void {
    return this.faults.delay(ms, match);
  }

  /** Run `hook` before handling the next `times` matching requests (a writer behind agentd's back). */
  beforeNext(
    match: RequestMatcher | undefined,
    hook: (request: RequestInfo) => void | Promise<void>,
    times = 1,
  ): void {
    this.faults.beforeNext(match, hook, times);
  }

  // ---- Request log ----------------------------------------------------------------------------

  get requests(): readonly RequestRecord[] {
    return this.log.map((l) => l.record);
  }

  countRequests(match?: RequestMatcher): number {
    return this.log.filter((l) => l.info !== undefined && matchRequest(match, l.info)).length;
  }

  clearRequests(): void {
    this.log.length = 0;
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.hub.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve, reject) => this.server.close((err) => (err ? reject(err) : resolve())));
  }

  // ---- internals ------------------------------------------------------------------------------

  private schedule(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }
}

/** Start a fake API server on 127.0.0.1 (random port). Always `close()` it. */
export async function startFakeKube(options: FakeKubeOptions = {}): Promise<FakeKube> {
  const server = http.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return new FakeKube(server, options);
}
