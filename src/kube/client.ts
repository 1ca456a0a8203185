/**
 * Builds the Kubernetes clients from the first credentials available, in the order of
 * docs/watcher.md: `--kubeconfig`, else the applied config's API server + CA + bootstrap token (or its exec
 * credential plugin), else the pod's service account when running in a cluster. Nothing here
 * logs or returns the token in a printable field.
 */
import { existsSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import path from 'node:path';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import type { AgentConfig } from '../config/agent-config.js';
import { InvalidConfigError } from '../errors.js';
import { createAgentPool, makeApiClient, type KubeTransport } from './connection-pool.js';
import { loadKubeconfig } from './kubeconfig.js';
import { createRateLimiter } from './rate-limit.js';
import type { RateLimitOptions } from './rate-limit.js';

/** Where the credentials came from. */
export type KubeCredentialSource =
  | 'kubeconfig'
  | 'bootstrap-token'
  | 'exec-credential'
  | 'in-cluster'
  /** The active machine's kubelet client certificate (src/kube/node-identity.ts): Node and pod calls only. */
  | 'node-identity';

export interface CreateKubeClientsOptions {
  /** `--kubeconfig FILE`: used when given; a file that cannot be loaded is an error. */
  kubeconfigPath?: string;
  /** The active machine's applied config (its API server, CA and kubelet credentials). */
  appliedConfig?: AgentConfig | null;
  /** Allow the in-cluster service account when `KUBERNETES_SERVICE_HOST` is set (default true). */
  inCluster?: boolean;
  /** `--crd-group`: the Machine CRD's API group, validated here and carried along. */
  crdGroup: string;
  /** Environment to read `KUBERNETES_SERVICE_HOST/PORT` from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Service account directory (default `/var/run/secrets/kubernetes.io/serviceaccount`). */
  serviceAccountDir?: string;
  /** The client-side rate limit of every request (default 5 per second, bursts of 10). */
  rateLimit?: RateLimitOptions;
}

/** Ready-to-use clients and where their credentials came from. */
export interface KubeClients {
  kc: KubeConfig;
  /**
   * The rate limit and connection pool every request passes: the API clients below carry it as
   * their middleware; watches (src/kube/watch-stream.ts) take it from here.
   */
  transport: KubeTransport;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  /** Leases: the fleet gate's slots (docs/fleet.md). */
  coordination: CoordinationV1Api;
  source: KubeCredentialSource;
  /** The API server URL (safe to log). */
  server: string;
  crdGroup: string;
}

/** No credentials were found; `reason` says what was looked for. */
export interface KubeClientsUnavailable {
  source: null;
  reason: string;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

const GROUP_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$/;

function fromAppliedConfig(config: AgentConfig): { kc: KubeConfig; source: KubeCredentialSource } {
  const auth = config.Kubelet.Auth;
  const kc = new KubeConfig();
  const user =
    auth.BootstrapToken !== undefined
      ? { name: 'agentd-bootstrap', token: auth.BootstrapToken }
      : {
          name: 'agentd-exec',
          exec: {
            command: auth.ExecCredential?.command,
            args: auth.ExecCredential?.args ?? [],
            env: auth.ExecCredential?.env ?? [],
            apiVersion: auth.ExecCredential?.apiVersion ?? 'client.authentication.k8s.io/v1',
            interactiveMode: 'Never',
          },
        };
  kc.loadFromOptions({
    clusters: [
      {
        name: 'agentd',
        server: config.Kubelet.ApiServer,
        caData: config.Cluster.CaCertBase64,
        skipTLSVerify: false,
      },
    ],
    users: [user],
    contexts: [{ name: 'agentd', cluster: 'agentd', user: user.name }],
    currentContext: 'agentd',
  });
  return { kc, source: auth.BootstrapToken !== undefined ? 'bootstrap-token' : 'exec-credential' };
}

/** Like client-node's `loadFromCluster`, but with the environment and directory injectable. */
function fromServiceAccount(host: string, port: string, dir: string): KubeConfig {
  const scheme = ['80', '8080', '8001'].includes(port) ? 'http' : 'https';
  const server = `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'in-cluster', server, caFile: path.join(dir, 'ca.crt'), skipTLSVerify: false }],
    users: [
      {
        name: 'in-cluster',
        authProvider: { name: 'tokenFile', config: { tokenFile: path.join(dir, 'token') } },
      },
    ],
    contexts: [{ name: 'in-cluster', cluster: 'in-cluster', user: 'in-cluster' }],
    currentContext: 'in-cluster',
  });
  return kc;
}

/**
 * Create the clients from the first credentials available, or say why there are none.
 * Throws `InvalidConfigError` for a bad `--crd-group` or a `--kubeconfig` that cannot be loaded.
 */
export function createKubeClients(options: CreateKubeClientsOptions): KubeClients | KubeClientsUnavailable {
  if (!GROUP_RE.test(options.crdGroup)) {
    throw new InvalidConfigError(
      `--crd-group: expected an API group such as unbounded-cloud.io, received ${JSON.stringify(options.crdGroup)}`,
      { data: { option: 'crd-group', received: options.crdGroup } },
    );
  }
  let kc: KubeConfig | undefined;
  let source: KubeCredentialSource | undefined;
  const env = options.env ?? process.env;
  const host = env.KUBERNETES_SERVICE_HOST;
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  if (options.kubeconfigPath !== undefined) {
    kc = loadKubeconfig(options.kubeconfigPath);
    source = 'kubeconfig';
  } else if (options.appliedConfig) {
    ({ kc, source } = fromAppliedConfig(options.appliedConfig));
  } else if (options.inCluster !== false && host) {
    if (!existsSync(path.join(dir, 'token'))) {
      return {
        source: null,
        reason: `KUBERNETES_SERVICE_HOST is set but there is no service account token in ${dir}`,
      };
    }
    kc = fromServiceAccount(host, env.KUBERNETES_SERVICE_PORT ?? '443', dir);
    source = 'in-cluster';
  }
  if (kc === undefined || source === undefined) {
    return {
      source: null,
      reason:
        'no Kubernetes credentials: no --kubeconfig, no applied config (the node has not joined yet)' +
        (options.inCluster === false ? ', in-cluster disabled' : ', and KUBERNETES_SERVICE_HOST is not set'),
    };
  }
  // One limit and one pool for every client and watch of these credentials.
  const transport: KubeTransport = { limiter: createRateLimiter(options.rateLimit), pool: createAgentPool() };
  return {
    kc,
    transport,
    custom: makeApiClient(kc, transport, CustomObjectsApi),
    core: makeApiClient(kc, transport, CoreV1Api),
    coordination: makeApiClient(kc, transport, CoordinationV1Api),
    source,
    server: kc.getCurrentCluster()?.server ?? '',
    crdGroup: options.crdGroup,
  };
}

/** A client certificate and key (PEM) to use instead of the session's user. */
export interface ClientCertificate {
  certPem: string;
  keyPem: string;
}

/**
 * Clients for this node's own identity (src/kube/node-identity.ts): the same API server and trust
 * as `session`'s, the kubelet's client certificate as the user, and the same transport (one rate
 * limit for the node; the connection pool keeps an agent per client certificate).
 */
export function createNodeClients(session: KubeClients, identity: ClientCertificate): KubeClients {
  const cluster = session.kc.getCurrentCluster();
  if (cluster === null) throw new Error('the session’s kubeconfig has no current cluster');
  const b64 = (pem: string): string => Buffer.from(pem, 'utf8').toString('base64');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...cluster, name: 'agentd' }],
    users: [{ name: 'agentd-node', certData: b64(identity.certPem), keyData: b64(identity.keyPem) }],
    contexts: [{ name: 'agentd', cluster: 'agentd', user: 'agentd-node' }],
    currentContext: 'agentd',
  });
  const { transport } = session;
  return {
    kc,
    transport,
    custom: makeApiClient(kc, transport, CustomObjectsApi),
    core: makeApiClient(kc, transport, CoreV1Api),
    coordination: makeApiClient(kc, transport, CoordinationV1Api),
    source: 'node-identity',
    server: session.server,
    crdGroup: session.crdGroup,
  };
}
