/**
 * Kubernetes in the daemon: which credentials to use (`--kubeconfig`, else the applied config's
 * API server + CA + bootstrap token, else in-cluster), this node's cordon/drain/uncordon for the
 * engine, and the Machine CR watcher's lifecycle. Kubernetes being broken (no CRD, a rejected
 * token, an unreachable server) never stops the daemon: it shows in logs, `status.watcher` and
 * the metrics. Only a `--kubeconfig` that cannot be loaded is a start-up error.
 */
import type { Logger } from 'pino';
import type { DaemonConfig } from '../config/daemon-config.js';
import type { AgentConfig } from '../config/agent-config.js';
import { createUpdateDrainer } from '../engine/drain-ops.js';
import type { NodeDrainOps } from '../engine/drain-ops.js';
import type { EventBus } from '../engine/events.js';
import { FINAL_STATES } from '../engine/operation.js';
import type { NodeDrainer } from '../engine/update.js';
import type { NodeHealthSource } from '../fleet/health-gate.js';
import { PreconditionFailedError, describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import type { KubeClients, KubeClientsUnavailable, createKubeClients } from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import { createRpcClient } from '../rpc/client.js';
import type { Dispatcher } from '../rpc/dispatcher.js';
import { createInProcessTransport } from '../rpc/in-process-transport.js';
import type { WatcherStatus } from '../rpc/services.js';
import type { MachineWatcher, MachineWatcherOptions } from '../watcher/index.js';
import type * as KubeRuntimeModule from './kube-runtime.js';

type KubeRuntime = typeof KubeRuntimeModule;

export interface KubeWiringOptions {
  config: Pick<DaemonConfig, 'kubeconfig' | 'machineName' | 'watch' | 'crdGroup' | 'host' | 'stateDir'>;
  /** The active machine's applied config, unredacted, as last read (`engine.activeAppliedConfig`). */
  appliedConfig: () => AgentConfig | null;
  /** Re-read the node before deciding whether the watcher can start (`engine.refreshNode`). */
  refreshNode?: () => Promise<void>;
  /** Operation events: when one ends, credentials or the Machine name may exist now (a join). */
  events: EventBus;
  logger: Logger;
  clock: Clock;
  metrics: Metrics;
  env?: NodeJS.ProcessEnv;
  /** Replace the client factory (tests). */
  createClients?: typeof createKubeClients;
  /** Called after every change of what `status` shows of Kubernetes: the cordon, the watcher. */
  onStatusChange?: () => void;
  /** Watcher tuning (tests, benchmarks). */
  watcher?: Pick<MachineWatcherOptions, 'backoff' | 'reconcile' | 'onReconciled'>;
}

export interface KubeWiring {
  /** This node's cordon/drain/uncordon; each call says why when Kubernetes is not available. */
  readonly nodeOps: NodeDrainOps;
  /** The update's drain seam, or null when there are no credentials (then `drain: true` is refused). */
  updateDrainer(): NodeDrainer | null;
  /** The health gate's view of this node's Node object, or why there is none (no credentials). */
  nodeHealth(): NodeHealthSource;
  /** Throws INVALID_CONFIG when `--kubeconfig` cannot be loaded (called before serving). */
  validate(): Promise<void>;
  /** After ready: start the watcher when it should run; look again whenever an operation ends. */
  start(dispatcher: Pick<Dispatcher, 'handle'>): void;
  watcherStatus(): WatcherStatus;
  /** Stop the watcher (shutdown step 2): it issues no new calls afterwards. */
  stop(): Promise<void>;
}

export function createKubeWiring(o: KubeWiringOptions): KubeWiring {
  const { config, clock, metrics } = o;
  const logger = o.logger.child({ component: 'kube' });
  let runtime: KubeRuntime | null = null;
  let loading: Promise<KubeRuntime> | null = null;
  /** Load the Kubernetes client code (once); nothing of it is loaded before this. */
  const loadRuntime = (): Promise<KubeRuntime> =>
    (loading ??= import('./kube-runtime.js').then((m) => (runtime = m)));
  let memo: { key: string; value: KubeClients | KubeClientsUnavailable } | null = null;

  const simWithoutKube = (): boolean =>
    config.host === 'sim' && config.kubeconfig === null && config.watch !== true;
  /** Whether any credential source may exist (decided without loading the client library). */
  const mightHaveCredentials = (): boolean =>
    !simWithoutKube() &&
    (config.kubeconfig !== null ||
      o.appliedConfig() !== null ||
      Boolean((o.env ?? process.env).KUBERNETES_SERVICE_HOST));

  /** The clients for the credentials of the moment (they change when the applied config does). */
  function clients(): KubeClients | KubeClientsUnavailable {
    // The simulated host's applied config names a placeholder API server: use Kubernetes there
    // only with --kubeconfig, or with an explicit --watch.
    if (simWithoutKube()) {
      return {
        source: null,
        reason:
          'the simulated host uses Kubernetes only with --kubeconfig (or --watch to use the applied config credentials)',
      };
    }
    if (runtime === null) {
      if (!mightHaveCredentials()) {
        return {
          source: null,
          reason:
            'no Kubernetes credentials: no --kubeconfig, no applied config (the node has not joined yet), and KUBERNETES_SERVICE_HOST is not set',
        };
      }
      void loadRuntime().catch((err: unknown) => logger.error({ err }, 'loading the Kubernetes client'));
      return { source: null, reason: 'the Kubernetes client is still loading; retry in a moment' };
    }
    const makeClients = o.createClients ?? runtime.createKubeClients;
    const applied = config.kubeconfig === null ? o.appliedConfig() : null;
    const a = applied?.Kubelet;
    const key =
      config.kubeconfig ??
      (a ? JSON.stringify([a.ApiServer, applied?.Cluster.CaCertBase64, a.Auth]) : 'in-cluster');
    if (memo?.key !== key) {
      memo = {
        key,
        value: makeClients({
          kubeconfigPath: config.kubeconfig ?? undefined,
          appliedConfig: applied,
          inCluster: config.host !== 'sim',
          crdGroup: config.crdGroup,
          env: o.env,
          rateLimit: { clock },
        }),
      };
      if (memo.value.source !== null) {
        logger.info({ source: memo.value.source, server: memo.value.server }, 'Kubernetes credentials');
      }
    }
    return memo.value;
  }

  const machineName = (): string | null => config.machineName ?? o.appliedConfig()?.MachineName ?? null;
  const changed = (): void => o.onStatusChange?.();

  // ---- cordon / drain / uncordon ----------------------------------------------------------

  let cordonState: boolean | null = null;
  /** The cordon as last seen; `status` shows it. */
  const setCordoned = (value: boolean | null): void => {
    cordonState = value;
    changed();
  };

  function unavailableReason(): string | null {
    let c: KubeClients | KubeClientsUnavailable;
    try {
      c = clients();
    } catch (err) {
      return describeError(err);
    }
    if (c.source === null) return c.reason;
    if (machineName() === null) return 'no node name: pass --machine-name, or join the node first';
    return null;
  }

  /** The Node is the one the Machine's `spec.kubernetes.nodeRef` names, else named like the Machine. */
  async function bound() {
    if (mightHaveCredentials()) await loadRuntime();
    const why = unavailableReason();
    if (why !== null) throw new PreconditionFailedError(`the Kubernetes API is not available: ${why}`);
    const rt = runtime as KubeRuntime;
    const c = clients() as KubeClients;
    const name = machineName() as string;
    let node = name;
    try {
      const machine = await rt
        .createMachineApi({ custom: c.custom, group: c.crdGroup, clock })
        .getMachine(name);
      node = machine?.spec.kubernetes?.nodeRef?.name ?? name;
    } catch {
      // No CRD or no permission: the Node is named like the Machine.
    }
    return { drainer: rt.createNodeDrainer({ core: c.core, clock }), core: c.core, node };
  }

  async function refreshCordoned(): Promise<void> {
    try {
      const { core, node } = await bound();
      const read = (await core.readNode({ name: node })) as { spec?: { unschedulable?: boolean } };
      setCordoned(read.spec?.unschedulable === true);
    } catch {
      // Best effort: the state stays as last seen.
    }
  }

  const nodeOps: NodeDrainOps = {
    unavailableReason,
    cordoned: () => cordonState,
    async cordon() {
      const { drainer, node } = await bound();
      const r = await drainer.cordon(node);
      setCordoned(true);
      return r;
    },
    async drain(options) {
      const { drainer, node } = await bound();
      try {
        const r = await drainer.drainNode(node, options);
        if (r.cordon !== null) setCordoned(options.dryRun ? r.cordon.alreadyCordoned : true);
        return r;
      } catch (err) {
        // A refused drain took its cordon back, a timed-out one did not: ask the node.
        await refreshCordoned();
        throw err;
      }
    },
    async uncordon(options = {}) {
      const { drainer, node } = await bound();
      const r = await drainer.uncordon(node, options);
      setCordoned(r.outcome === 'cordoned-by-other');
      return r;
    },
  };

  // ---- the watcher ------------------------------------------------------------------------

  let watcher: MachineWatcher | null = null;
  let dispatcher: Pick<Dispatcher, 'handle'> | null = null;
  let whyOff = 'the daemon is not ready yet';
  /** Why the watcher does not run; `status` shows it. */
  const setReason = (value: string): void => {
    whyOff = value;
    changed();
  };
  let stopped = false;
  let unsubscribe: (() => void) | null = null;
  let checking: Promise<void> | null = null;
  let checkAgain = false;

  function whyNoWatcher(): string | null {
    if (config.watch === false) return 'disabled by --no-watch';
    const why = unavailableReason();
    if (why !== null) return why;
    return null;
  }

  async function startIfPossible(): Promise<void> {
    if (stopped || watcher !== null || dispatcher === null) return;
    await o.refreshNode?.().catch(() => undefined);
    if (mightHaveCredentials()) await loadRuntime();
    if (stopped || watcher !== null) return;
    const why = whyNoWatcher();
    if (why !== null) {
      noteWhyOff(why);
      return;
    }
    const rt = runtime as KubeRuntime;
    const c = clients() as KubeClients;
    watcher = rt.createMachineWatcher({
      ...o.watcher,
      machineName: machineName() as string,
      machines: rt.createMachineApi({ custom: c.custom, group: c.crdGroup, clock }),
      watchMachine: rt.createMachineWatch({ kc: c.kc, group: c.crdGroup }).watchMachine,
      rpc: createRpcClient(createInProcessTransport(dispatcher, 'watcher')),
      // A target that rolled back stays blocked across restarts of agentd (docs/watcher.md).
      blocked: rt.createBlockedTargetFile(config.stateDir, logger),
      registrationConfig: o.appliedConfig,
      logger,
      metrics,
      clock,
      onStatusChange: changed,
    });
    changed();
    watcher.start();
    void refreshCordoned();
  }

  /** Log and show a new reason why the watcher does not run. */
  function noteWhyOff(why: string): void {
    if (why === whyOff) return;
    const level = config.watch === true ? 'warn' : 'info';
    logger[level]({ reason: why }, 'the Machine watcher does not run');
    setReason(why);
  }

  /** Look (again) whether the watcher can start; calls during a look make it look once more. */
  function recheck(): void {
    if (checking !== null) {
      checkAgain = true;
      return;
    }
    checking = (async () => {
      do {
        checkAgain = false;
        await startIfPossible().catch((err: unknown) => {
          setReason(`cannot start the watcher: ${describeError(err)}`);
          logger.warn({ err: describeError(err) }, 'cannot start the Machine watcher');
        });
      } while (checkAgain && !stopped);
    })().finally(() => {
      checking = null;
    });
  }

  return {
    nodeOps,
    updateDrainer: () => (unavailableReason() === null ? createUpdateDrainer(nodeOps) : null),
    nodeHealth() {
      // A client still loading is not "no credentials": the first read waits for it (bound()).
      const why = runtime === null && mightHaveCredentials() ? null : unavailableReason();
      if (why !== null) return { unavailable: why };
      // The Node's name is looked up once per gate (like drain: the Machine's nodeRef, else its name).
      let node: ReturnType<typeof bound> | null = null;
      return {
        async read() {
          node ??= bound();
          try {
            const { core, node: name } = await node;
            return await (runtime as KubeRuntime).getNodeHealth(core, name);
          } catch (err) {
            node = null;
            throw err;
          }
        },
      };
    },
    async validate() {
      // Load the client code only when a credential source may exist, before the daemon is ready.
      if (mightHaveCredentials()) await loadRuntime();
      if (config.kubeconfig !== null) clients();
    },
    start(d) {
      dispatcher = d;
      unsubscribe = o.events.subscribe((_seq, event) => {
        if (event.type === 'operation' && FINAL_STATES.has(event.operation.state) && watcher === null)
          recheck();
      });
      // Say at once why the watcher cannot run when that is known without I/O (the first look
      // re-reads the node first), so the first status after ready does not say "not ready".
      const why = whyNoWatcher();
      if (why !== null) noteWhyOff(why);
      recheck();
    },
    watcherStatus() {
      if (watcher !== null) return watcher.status();
      return {
        enabled: false,
        reason: whyOff,
        connected: false,
        machineName: machineName(),
        lastEventAt: null,
        lastReconcileAt: null,
        lastError: null,
        lastErrorCode: null,
        blocked: null,
      };
    },
    async stop() {
      stopped = true;
      unsubscribe?.();
      await checking;
      await watcher?.stop();
    },
  };
}
