/**
 * A real Kubernetes control plane for a test file (docs/testing.md, "The real control plane"):
 * etcd, kube-apiserver and kube-controller-manager (only the disruption controller) built from
 * the pinned modules under test/control-plane/, on 127.0.0.1, in a temp dir; the kubelet's part
 * played by `kubelet-stand-in.ts`; deploy/ installed with the real kubectl as docs/watcher.md
 * tells an operator. `startControlPlane()` returns once kube-apiserver is ready, the CRD
 * Established and the RBAC accepted: a few seconds once the binaries are built.
 *
 * Every process is killed by `stop()` (SIGKILL: nothing of a test cluster needs an orderly
 * shutdown, and kube-apiserver's takes seconds), and by the reaper (`processes.ts`) when the test
 * process dies without it. No vitest import here (a bench uses it too): `use.ts` binds it to a
 * test file's beforeAll/afterAll.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { apiClient, type ApiClient } from './api.js';
import { controlPlaneBin } from './binaries.js';
import { startEtcd, type Etcd } from './etcd.js';
import { createKubeApiServer, type KubeApiServer, type KubeApiServerOptions } from './kube-apiserver.js';
import { startKubeControllerManager } from './kube-controller-manager.js';
import { startKubeletStandIn, type KubeletStandIn, type KubeletStandInOptions } from './kubelet-stand-in.js';
import { kubectl, kubectlOk, type KubectlResult } from './kubectl.js';
import { adminKubeconfigYaml, makePki, tokenKubeconfigYaml } from './pki.js';
import { pollUntil, startReaper, type ManagedProcess } from './processes.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

export { controlPlaneAvailable, controlPlaneMissingMessage } from './binaries.js';
export type { ApiClient, KubeJson } from './api.js';
export type { TcpProxy } from './tcp-proxy.js';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const DEPLOY_DIR = path.join(REPO_ROOT, 'deploy');
/** Upstream's Machine CRD schema as docs/compatibility.md describes it (a test fixture). */
export const UPSTREAM_CRD = fileURLToPath(new URL('./upstream-machine-crd.yaml', import.meta.url));
export const MACHINE_CRD = 'machines.unbounded-cloud.io';

export interface ControlPlaneOptions {
  /** Install deploy/ with `kubectl apply -f deploy/` (default true). */
  deploy?: boolean;
  /** Run kube-controller-manager's disruption controller (default true). */
  controllerManager?: boolean;
  apiServer?: KubeApiServerOptions;
  /** The kubelet stand-in's pace (default: a look every 200 ms, a Node status every 5 s). */
  kubelet?: KubeletStandInOptions;
}

export interface BootstrapToken {
  id: string;
  secret: string;
  /** `<id>.<secret>`, as `Kubelet.Auth.BootstrapToken` carries it. */
  token: string;
}

export interface ControlPlane {
  bin: string;
  dir: string;
  /** kube-apiserver's `https://127.0.0.1:<port>`. */
  server: string;
  caPem: string;
  caFile: string;
  /** A kubeconfig file for the admin (O=system:masters). */
  adminKubeconfig: string;
  /** The tests' client, as the admin. */
  api: ApiClient;
  /** A bootstrap token (group system:bootstrappers), created at start. */
  bootstrapToken: BootstrapToken;
  kubelet: KubeletStandIn;
  etcd: Etcd;
  apiServer: KubeApiServer;
  controllerManager: ManagedProcess | null;
  kubectl(args: string[]): Promise<KubectlResult>;
  /** Another bootstrap token (a Secret `bootstrap-token-<id>` in kube-system). */
  createBootstrapToken(): Promise<BootstrapToken>;
  /** A client authenticating with `token`. */
  tokenClient(token: string): ApiClient;
  /** A kubeconfig (YAML text) for `server` (default kube-apiserver) with a bearer token. */
  tokenKubeconfig(token: string, server?: string): string;
  /** Replace the Machine CRD by `file` (deploy/machine-crd.yaml or UPSTREAM_CRD) and wait until it is Established. */
  installCrd(file: string): Promise<void>;
  /** A TCP proxy to kube-apiserver that the test controls; closed by `stop()`. */
  proxy(): Promise<TcpProxy>;
  /** What every process wrote, for a failing test's message. */
  logs(): string;
  stop(): Promise<void>;
}

const randomToken = (n: number): string => {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let s = '';
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(Math.random() * alphabet.length)];
  return s;
};

export async function startControlPlane(o: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const bin = controlPlaneBin();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-cp-'));
  const reaper = startReaper();
  reaper.dir(dir);
  const proxies: TcpProxy[] = [];
  let kubelet: KubeletStandIn | null = null;
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async (): Promise<void> => {
    await kubelet?.stop();
    for (const p of proxies) await p.close();
    for (const s of stops.reverse()) await s();
    await reaper.close();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const pki = await makePki(dir);
    const etcd = await startEtcd(bin, dir, reaper);
    stops.push(() => etcd.process.kill());
    const apiServer = await createKubeApiServer(bin, dir, etcd.url, pki, reaper, o.apiServer);
    stops.push(() => apiServer.kill());
    await apiServer.start();
    const adminKubeconfig = path.join(dir, 'admin.kubeconfig');
    await writeFile(adminKubeconfig, adminKubeconfigYaml(pki, apiServer.url), { mode: 0o600 });
    const api = apiClient({
      server: apiServer.url,
      caPem: pki.caPem,
      cert: pki.adminCertPem,
      key: pki.adminKeyPem,
    });
    let controllerManager: ManagedProcess | null = null;
    if (o.controllerManager !== false) {
      const kcm = startKubeControllerManager(bin, adminKubeconfig, reaper);
      controllerManager = kcm;
      stops.push(() => kcm.kill());
    }
    const createBootstrapToken = async (): Promise<BootstrapToken> => {
      const id = randomToken(6);
      const secret = randomToken(16);
      await pollUntil(
        'the bootstrap token Secret to be created in kube-system',
        async () => {
          const res = await api.request('POST', '/api/v1/namespaces/kube-system/secrets', {
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: { name: `bootstrap-token-${id}`, namespace: 'kube-system' },
            type: 'bootstrap.kubernetes.io/token',
            stringData: { 'token-id': id, 'token-secret': secret, 'usage-bootstrap-authentication': 'true' },
          });
          if (res.status !== 201) throw new Error(`HTTP ${res.status}: ${res.text}`);
          return true;
        },
        20_000,
      );
      return { id, secret, token: `${id}.${secret}` };
    };
    const bootstrapToken = await createBootstrapToken();
    const run = (args: string[]): Promise<KubectlResult> => kubectl(bin, adminKubeconfig, args);
    /**
     * Established, and serving: right after Established the resource's storage is still
     * initializing and kube-apiserver answers 429 "storage is (re)initializing" (Retry-After 1)
     * for a moment. Tests start against a settled server; agentd meets that 429 only where a
     * test makes it.
     */
    const crdReady = async (): Promise<void> => {
      await kubectlOk(bin, adminKubeconfig, [
        'wait',
        '--for',
        'condition=established',
        '--timeout=60s',
        `crd/${MACHINE_CRD}`,
      ]);
      await pollUntil(
        'the Machine resource to be served',
        async () =>
          (await api.request('GET', '/apis/unbounded-cloud.io/v1alpha3/machines?limit=1')).status === 200,
        30_000,
      );
    };
    const installCrd = async (file: string): Promise<void> => {
      // Replace, not merge: the other schema's fields must not linger (created when missing).
      await kubectlOk(bin, adminKubeconfig, ['replace', '--force=false', '-f', file]).catch(async () => {
        await kubectlOk(bin, adminKubeconfig, ['create', '-f', file]);
      });
      await crdReady();
    };
    if (o.deploy !== false) {
      // As docs/watcher.md tells an operator.
      await kubectlOk(bin, adminKubeconfig, ['apply', '-f', DEPLOY_DIR]);
      await crdReady();
    }
    kubelet = startKubeletStandIn(api, o.kubelet);
    const processes = (): ManagedProcess[] =>
      [etcd.process, apiServer.process(), controllerManager].filter((p): p is ManagedProcess => p !== null);
    return {
      bin,
      dir,
      server: apiServer.url,
      caPem: pki.caPem,
      caFile: pki.caFile,
      adminKubeconfig,
      api,
      bootstrapToken,
      kubelet,
      etcd,
      apiServer,
      controllerManager,
      kubectl: run,
      createBootstrapToken,
      tokenClient: (token) => apiClient({ server: apiServer.url, caPem: pki.caPem, token }),
      tokenKubeconfig: (token, server = apiServer.url) => tokenKubeconfigYaml(pki.caPem, server, token),
      installCrd,
      async proxy() {
        const p = await startTcpProxy(apiServer.port);
        proxies.push(p);
        return p;
      },
      logs: () =>
        processes()
          .map((p) => `--- ${p.name}\n${p.logs().slice(-4000)}`)
          .join('\n'),
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
