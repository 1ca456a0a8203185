/**
 * The daemon's Kubernetes session: which credentials to use (`--kubeconfig`, else the applied
 * config's API server + CA + bootstrap token, else in-cluster), the client code loaded lazily and
 * clients built once per set of credentials, and this node's cordon/drain/uncordon bound to them.
 * Calls on this node's Node and pods (cordon, drain, uncordon, the Node watch and health reads) use
 * the node's own identity when the active machine's kubelet holds one (src/kube/node-identity.ts;
 * docs/watcher.md, "Least privilege"), the session's credentials otherwise.
 * Kubernetes being broken (no CRD, a rejected token, an unreachable server) never throws out of
 * here except from the calls that need it: only a `--kubeconfig` that cannot be loaded is a
 * start-up error (`validate`).
 */
import type { Logger } from 'pino';
import type { AgentConfig } from '../config/agent-config.js';
import type { DaemonConfig } from '../config/daemon-config.js';
import { PreconditionFailedError, describeError, isAgentError, type AgentError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { WATCH_BACKOFF, type BackoffPolicy } from '../retry/backoff.js';
import type { KubeClients, KubeClientsUnavailable, createKubeClients, createNodeClients } from './client.js';
import type { CordonResult, DrainOptions, DrainResult, UncordonResult } from './drain.js';
import type * as KubeRuntimeModule from './runtime.js';
import type { NodeRecord } from './node-watch.js';
import type { ReflectorSource } from './reflector.js';
import { createNodeCredentialChooser, type KubeletFiles, type NodeCredentials } from './node-identity.js';

/** The lazily loaded client code (`src/kube/runtime.ts`). */
export type KubeRuntime = typeof KubeRuntimeModule;

/** Cordon, drain and uncordon of this node. Every method throws when `unavailableReason()` is set. */
export interface NodeOps {
  /** Why the node cannot be drained now (no credentials, no node name), or null when it can. */
  unavailableReason(): string | null;
  /** Whether the node is cordoned, as last seen; null when unknown. */
  cordoned(): boolean | null;
  /**
   * Why `cordoned()` is not followed on the Node (a ClusterRole that cannot watch nodes), so it may
   * be old; null while it is followed or not known at all. `status` shows it as a warning.
   */
  cordonWarning?(): string | null;
  cordon(): Promise<CordonResult>;
  drain(options: DrainOptions): Promise<DrainResult>;
  /** Undo agentd's own cordon; with `force` also an administrator's. */
  uncordon(options?: { force?: boolean }): Promise<UncordonResult>;
}

export interface KubeSessionOptions {
  config: Pick<DaemonConfig, 'kubeconfig' | 'machineName' | 'watch' | 'crdGroup' | 'host'>;
  /** The active machine's applied config, unredacted, as last read. */
  appliedConfig: () => AgentConfig | null;
  logger: Logger;
  clock: Clock;
  env?: NodeJS.ProcessEnv;
  /** Replace the client factory (tests). */
  createClients?: typeof createKubeClients;
  /** Replace the node identity's client factory (tests). */
  createNodeClients?: typeof createNodeClients;
  /** Called whenever the cordon as last seen changes (`status` shows it). */
  onCordonChange?: () => void;
  /** Restarts of the watch of this node's Node object (default WATCH_BACKOFF). */
  cordonBackoff?: BackoffPolicy;
  /**
   * The active machine's rootfs on the host (`/var/lib/machines/<m>` under `--root`) and its
   * kubelet's kubeconfig as the machine sees it, or null: where this node's own identity (its
   * kubelet's client certificate) is looked for. Without it, or with `--kubeconfig`, Node and pod
   * calls use the session's credentials.
   */
  activeKubelet?: () => KubeletFiles | null;
}

export type { NodeCredentials } from './node-identity.js';

/** The session's clients with what they were built for, once Kubernetes is available. */
export interface KubeConnection {
  runtime: KubeRuntime;
  clients: KubeClients;
  /** The Machine CR's name (`--machine-name`, else the applied config's `MachineName`). */
  machineName: string;
}

export interface KubeSession {
  /** Whether any credential source may exist (decided without loading the client library). */
  mightHaveCredentials(): boolean;
  /** Why Kubernetes cannot be used now (no credentials, no node name), or null when it can. */
  unavailableReason(): string | null;
  /** The Machine CR's name, or null when none is known yet. */
  machineName(): string | null;
  /** Load the client code, when a credential source may exist (before that, nothing of it is loaded). */
  load(): Promise<void>;
  /** `load`, then the clients of the moment; PRECONDITION_FAILED saying why when Kubernetes is not available. */
  connect(): Promise<KubeConnection>;
  /** The clients of the moment, or null when Kubernetes is not available or its code not loaded yet. */
  current(): KubeConnection | null;
  /** True while credentials may exist but the client code is not loaded yet ("not yet", not "no"). */
  loading(): boolean;
  /**
   * This node's Node object name (the Machine's `spec.kubernetes.nodeRef`, else its name) and the
   * clients for calls on it and its pods: the node's own identity when there is one.
   */
  node(): Promise<KubeConnection & { node: string }>;
  /** Which credentials Node and pod calls use now, and why (looked up anew). */
  nodeCredentials(): NodeCredentials;
  /** This node's cordon/drain/uncordon. */
  readonly nodeOps: NodeOps;
  /** Ask the API server whether the node is cordoned (best effort). */
  refreshCordoned(): Promise<void>;
  /**
   * Follow this node's cordon until `signal` aborts: a reflector on its Node object (it lists,
   * watches, and retries with the watch backoff). Without the right to list and watch Nodes (a ClusterRole older than
   * deploy/rbac.yaml) it reads the Node once, says so in the log, and stops. Never throws.
   */
  followCordon(signal: AbortSignal): Promise<void>;
  /** Throws INVALID_CONFIG when `--kubeconfig` cannot be loaded (called before serving). */
  validate(): Promise<void>;
}

export function createKubeSession(o: KubeSessionOptions): KubeSession {
  const { config, clock, logger } = o;
  let runtime: KubeRuntime | null = null;
  let loading: Promise<KubeRuntime> | null = null;
  /** Load the Kubernetes client code (once); nothing of it is loaded before this. */
  const loadRuntime = (): Promise<KubeRuntime> =>
    (loading ??= import('./runtime.js').then((m) => (runtime = m)));
  let memo: { key: string; value: KubeClients | KubeClientsUnavailable } | null = null;

  const simWithoutKube = (): boolean =>
    config.host === 'sim' && config.kubeconfig === null && config.watch !== true;
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

  const chooser = createNodeCredentialChooser({
    kubeconfigGiven: config.kubeconfig !== null,
    appliedConfig: o.appliedConfig,
    activeKubelet: o.activeKubelet,
    logger,
  });
  const nodeClients = (rt: KubeRuntime, base: KubeClients): KubeClients =>
    chooser.clients(base, o.createNodeClients ?? rt.createNodeClients);

  const machineName = (): string | null => config.machineName ?? o.appliedConfig()?.MachineName ?? null;

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

  async function load(): Promise<void> {
    if (mightHaveCredentials()) await loadRuntime();
  }

  async function connect(): Promise<KubeConnection> {
    await load();
    const why = unavailableReason();
    if (why !== null) throw new PreconditionFailedError(`the Kubernetes API is not available: ${why}`);
    return current() as KubeConnection;
  }

  function current(): KubeConnection | null {
    if (runtime === null || unavailableReason() !== null) return null;
    return { runtime, clients: clients() as KubeClients, machineName: machineName() as string };
  }

  // ---- cordon / drain / uncordon ----------------------------------------------------------

  let cordonState: boolean | null = null;
  let cordonNotFollowed: string | null = null;
  /** The cordon as last seen; `status` shows it. */
  const setCordoned = (value: boolean | null): void => {
    // The watch sees every change of the Node (kubelet's status updates too): only a new value
    // changes what `status` shows.
    if (value === cordonState) return;
    cordonState = value;
    o.onCordonChange?.();
  };

  /**
   * The Node is the one the Machine's `spec.kubernetes.nodeRef` names, else (no Machine, no CRD,
   * no permission to read Machines) named like the Machine. Any other failure to read the Machine
   * (the API server unreachable or failing) is thrown: guessing then could cordon or drain
   * another node than this one.
   */
  async function bound() {
    const conn = await connect();
    const { runtime: rt, clients: c, machineName: name } = conn;
    let node = name;
    try {
      const machine = await rt
        .createMachineApi({ custom: c.custom, group: c.crdGroup, clock })
        .getMachine(name);
      node = machine?.spec.kubernetes?.nodeRef?.name ?? name;
    } catch (err) {
      const reason = isAgentError(err) ? err.data.reason : undefined;
      if (reason !== 'CrdMissing' && reason !== 'Forbidden') throw err;
    }
    const nc = nodeClients(rt, c);
    return {
      ...conn,
      clients: nc,
      drainer: rt.createNodeDrainer({ core: nc.core, clock }),
      core: nc.core,
      node,
    };
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

  /**
   * One reflector (src/kube/reflector.ts) follows the Node; its list binds the node anew each
   * time (credentials and the Machine's nodeRef may have changed since).
   */
  async function followCordon(signal: AbortSignal): Promise<void> {
    let rt: KubeRuntime;
    try {
      rt = await loadRuntime();
    } catch (err) {
      logger.error({ err: describeError(err) }, 'loading the Kubernetes client');
      return;
    }
    let node = '';
    let source: ReflectorSource<NodeRecord> | null = null;
    let forbidden: AgentError | null = null;
    /** The Node as last listed or watched (undefined: not yet). */
    let last: NodeRecord | null | undefined;
    const show = (n: NodeRecord | null): void => {
      last = n;
      setCordoned(n === null ? null : n.unschedulable);
    };
    const reflector = rt.createReflector<NodeRecord>({
      what: 'this node’s Node object',
      async list(s) {
        const b = await bound();
        node = b.node;
        const { kc, transport } = b.clients;
        source = b.runtime.createNodeWatch({ kc, core: b.core, transport }).source(b.node);
        return source.list(s);
      },
      decode: (object) => {
        if (source === null) throw new Error('no Node listed yet');
        return source.decode(object);
      },
      onList: (items) => show(items[0] ?? null),
      onEvent: (type, n) => show(type === 'DELETED' ? null : n),
      onDecodeError: (err) =>
        logger.warn({ err: err.message, node }, 'a Node watch event could not be decoded'),
      // A watch resumed after a failure starts where the last one was: what it saw holds again.
      onConnected: (connected) => {
        if (connected && last !== undefined) setCordoned(last === null ? null : last.unschedulable);
      },
      giveUp(err) {
        if (err.data.reason !== 'Forbidden') return false;
        forbidden = err;
        return true;
      },
      onFailure(err, retryInMs) {
        // Not followed until the watch is back: unknown, rather than a value that may be old.
        setCordoned(null);
        logger.warn({ err: describeError(err), node, retryInMs }, 'watch of this node’s Node object failed');
      },
      clock,
      backoff: o.cordonBackoff ?? WATCH_BACKOFF,
    });
    await reflector.start(signal);
    if (forbidden === null || signal.aborted) return;
    logger.warn(
      { err: describeError(forbidden), node },
      'cannot watch this node’s Node object (its ClusterRole lacks list and watch on nodes: apply deploy/rbac.yaml, then restart agentd); until then status shows the cordon agentd last saw, with a warning',
    );
    await refreshCordoned();
    cordonNotFollowed = `the cordon shown is what agentd last saw: it cannot watch the Node ${node} (its ClusterRole lacks list and watch on nodes: apply deploy/rbac.yaml, then restart agentd)`;
    o.onCordonChange?.();
  }

  const nodeOps: NodeOps = {
    unavailableReason,
    cordoned: () => cordonState,
    cordonWarning: () => cordonNotFollowed,
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

  return {
    mightHaveCredentials,
    unavailableReason,
    machineName,
    connect,
    current,
    loading: () => runtime === null && mightHaveCredentials(),
    node: bound,
    nodeCredentials: () => chooser.current(),
    nodeOps,
    refreshCordoned,
    followCordon,
    load,
    async validate() {
      // Load the client code only when a credential source may exist, before the daemon is ready.
      await load();
      if (config.kubeconfig !== null) clients();
    },
  };
}
