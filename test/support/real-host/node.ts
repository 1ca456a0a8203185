/**
 * A real node for the real-host suite: a booted systemd host (`host.ts`) with agentd installed
 * from the release artifacts as an operator would (`install.ts`) and running as
 * `agentd.service` with `--host systemd`,
 * a real docker-registry holding the machine images (`images.ts`) and the artifact mirror, both
 * in the host's network namespace; `agentctl` runs outside the host and reaches the daemon
 * through the socket (via /proc/<host PID 1>/root, see docs/testing.md).
 */
import { type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { AgentConfigInput } from '../../../src/config/agent-config.js';
import { mirrorDownloads } from '../../../src/sim/mirror/index.js';
import { makeAgentConfig } from '../agent-config.js';
import { bootRealHost, type RealHost } from './host.js';
import { ensureMachineImageLayout, MACHINE_IMAGE_TAGS, type MachineImageTag } from './images.js';
import { REPO, installAgentd, stageInstall, type InstallKind } from './install.js';
import { writeRegistryConfig } from '../system-tools.js';
import { assertRealHostTools } from './require.js';
import { run, runOk } from './run.js';

export const REGISTRY = '127.0.0.1:5000';
/** The built agentctl of this checkout (`npm run build`). */
export const AGENTCTL_BIN = path.join(REPO, 'dist/bin/agentctl.js');

/** What an `agentctl` run reports. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** This process's environment without AGENTD_ and AGENTCTL_ settings, and without colors. */
function agentctlEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('AGENTD_') && !k.startsWith('AGENTCTL_')),
  );
  return { ...env, NO_COLOR: '1' };
}
export const MIRROR_URL = 'http://127.0.0.1:8080';
export const MACHINE_REPOSITORY = 'agentd/machine';

/**
 * Production defaults but for the machine timeouts, which are shortened so a machine that never
 * boots or a kubelet that never turns healthy fails within seconds.
 */
const SHORT_MACHINE_TIMEOUTS = ['machineStartTimeout: 30s', 'verifyTimeout: 15s'];

/** The daemon config of the suite's nodes. */
export const REAL_NODE_CONFIG = [
  ...SHORT_MACHINE_TIMEOUTS,
  // No cluster here: the watcher would only retry an unreachable API server, and the fleet gate
  // would wait for it (docs/fleet.md: an unreachable API server keeps updates waiting).
  'watch: false',
  'fleet: false',
  '',
].join('\n');

/** Where a node started with `cluster: true` finds its kubeconfig, inside the host. */
export const CLUSTER_KUBECONFIG = '/etc/agentd/kubeconfig';

/**
 * The daemon config of a node with a cluster (`cluster: true`): the fake API server in the host's
 * network namespace through a kubeconfig, the Machine watcher on. The fleet gate stays off, as
 * for the suite's other nodes: it has its own tests against the same server (test/integration).
 */
export const CLUSTER_NODE_CONFIG = [
  ...SHORT_MACHINE_TIMEOUTS,
  `kubeconfig: ${CLUSTER_KUBECONFIG}`,
  'watch: true',
  'fleet: false',
  '',
].join('\n');

export interface RealNodeOptions {
  label: string;
  /** kubelet versions whose stand-in never turns healthy (a regular expression's source). */
  unhealthyKubelet?: string;
  /** Extra lines for /etc/agentd/config.yaml. */
  extraConfig?: string;
  /** Extra `systemd-nspawn` arguments for the host (e.g. a read-only bind of the repository). */
  nspawnArgs?: string[];
  /** Which release artifact installs agentd (default: the tarball and its install.sh). */
  install?: InstallKind;
  /**
   * Give the node a cluster: the fake API server (test/support/fake-kube) runs in the host's
   * network namespace and agentd reaches it through a kubeconfig, with the Machine watcher on
   * (CLUSTER_NODE_CONFIG). Without it the node has none (REAL_NODE_CONFIG).
   */
  cluster?: boolean;
}

export interface RealNode {
  host: RealHost;
  /** The socket as seen from outside the host. */
  socket: string;
  /** `127.0.0.1:5000/agentd/machine:<tag>`. */
  image(tag: MachineImageTag): string;
  /** An agent config pointing at the suite's registry and mirror. */
  agentConfig(overrides?: Partial<AgentConfigInput>): AgentConfigInput;
  /** Write `config` to a file outside the host (for `agentctl update --config`). */
  configFile(config: AgentConfigInput): Promise<string>;
  /** `agentctl --socket <socket> …` from outside the host. */
  agentctl(args: string[], timeoutMs?: number): Promise<CliRun>;
  /** `agentctl --json …`, parsed; fails with agentctl's output unless the exit code is `expectCode`. */
  agentctlJson<T = Record<string, unknown>>(
    args: string[],
    expectCode?: number,
    timeoutMs?: number,
  ): Promise<T>;
  /** Wait until agentd answers `status` and is ready (after a start or a restart by systemd). */
  waitReady(timeoutMs?: number): Promise<void>;
  /** agentd's journal in the host (for failure messages). */
  journal(lines?: number): Promise<string>;
  /** The node's cluster (`cluster: true`), else null. */
  cluster: ClusterAccess | null;
  stop(): Promise<void>;
}

/** What a test asks of the fake API server of a node with a cluster: real HTTP, from its namespace. */
export interface ClusterAccess {
  /**
   * One request as the cluster's admin, `curl` in the host's network namespace; a body is sent as
   * a JSON merge patch for PATCH, else as JSON. Answers the status code and the parsed body.
   */
  request<T = Record<string, unknown>>(
    method: 'GET' | 'PATCH' | 'POST' | 'DELETE',
    apiPath: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }>;
}

let configCounter = 0;

function withApiServer(url: string): Pick<AgentConfigInput, 'Kubelet'> {
  const base = makeAgentConfig();
  return { Kubelet: { ...base.Kubelet, ApiServer: url } };
}

export async function startRealNode(options: RealNodeOptions): Promise<RealNode> {
  assertRealHostTools();
  const layout = await ensureMachineImageLayout();
  const kind = options.install ?? 'tarball';
  let artifact = '';
  const host = await bootRealHost({
    label: options.label,
    nspawnArgs: options.nspawnArgs ?? [],
    prepare: async (rootfs) => {
      const config = options.cluster ? CLUSTER_NODE_CONFIG : REAL_NODE_CONFIG;
      artifact = await stageInstall(rootfs, kind, config + (options.extraConfig ?? ''));
    },
  });
  const helpers: ChildProcess[] = [];
  let cluster: ClusterAccess | null = null;
  try {
    if (options.cluster) {
      const kube = await startKubeHelper(host);
      helpers.push(kube.proc);
      cluster = clusterAccess(host, kube.url, kube.token);
    }
    helpers.push(await startRegistry(host));
    await pushImages(host, layout);
    helpers.push(await startMirrorHelper(host, options.unhealthyKubelet));
    // install.sh and the .deb's postinst enable and start agentd.service: Type=notify, so it is
    // ready when they return.
    await installAgentd(host, kind, artifact);
  } catch (err) {
    for (const h of helpers) h.kill('SIGTERM');
    await host.stop();
    throw err;
  }

  const socket = host.outside('/run/agentd/agentd.sock');
  const agentctl = async (args: string[], timeoutMs = 120_000): Promise<CliRun> => {
    const res = await run(process.execPath, [AGENTCTL_BIN, '--socket', socket, ...args], {
      timeoutMs,
      cwd: host.dir,
      env: agentctlEnv(),
    });
    return { code: res.exitCode, stdout: res.stdout, stderr: res.stderr };
  };
  const journal = async (lines = 200): Promise<string> =>
    (await host.exec(['journalctl', '-u', 'agentd.service', '-n', String(lines), '--no-pager', '-o', 'cat']))
      .stdout;

  const node: RealNode = {
    host,
    socket,
    image: (tag) => `${REGISTRY}/${MACHINE_REPOSITORY}:${tag}`,
    agentConfig: (overrides = {}) =>
      makeAgentConfig({
        OCIImage: `${REGISTRY}/${MACHINE_REPOSITORY}:v1`,
        Downloads: mirrorDownloads(MIRROR_URL),
        // Loopback, never a routed address: nothing of the suite leaves the host's namespace.
        ...withApiServer('https://127.0.0.1:6443'),
        ...overrides,
      }),
    configFile: async (config) => {
      const file = path.join(host.dir, `agent-config-${configCounter++}.json`);
      await writeFile(file, JSON.stringify(config));
      return file;
    },
    agentctl,
    agentctlJson: async <T>(args: string[], expectCode = 0, timeoutMs?: number): Promise<T> => {
      const res = await agentctl(['--json', ...args], timeoutMs);
      if (res.code !== expectCode) {
        throw new Error(
          `agentctl ${args.join(' ')} exited ${res.code} (want ${expectCode})\nstdout: ${res.stdout}\nstderr: ${res.stderr}\n--- agentd journal ---\n${await journal()}`,
        );
      }
      return JSON.parse(res.stdout) as T;
    },
    waitReady: async (timeoutMs = 60_000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const res = await agentctl(['--json', 'rpc', 'status'], 10_000).catch(() => undefined);
        if (res?.code === 0) {
          const status = JSON.parse(res.stdout) as { daemon?: { state?: string } };
          if (status.daemon?.state === 'ready') return;
        }
        if (Date.now() > deadline) {
          throw new Error(`agentd did not become ready in ${timeoutMs} ms\n${await journal()}`);
        }
        await delay(200);
      }
    },
    journal,
    cluster,
    stop: async () => {
      for (const h of helpers) h.kill('SIGTERM');
      await host.stop();
    },
  };
  return node;
}

/**
 * A node with agentd started as a unit and joined to kube1 (the default agent config: Kubernetes
 * 1.34.0, image `v1`), the starting point of most scenarios.
 */
export async function startJoinedNode(options: RealNodeOptions): Promise<RealNode> {
  const node = await startRealNode(options);
  try {
    await node.waitReady();
    const op = await node.agentctlJson<{ state: string; to: string; error: unknown }>(
      ['update', '--config', await node.configFile(node.agentConfig())],
      0,
      300_000,
    );
    if (op.state !== 'succeeded' || op.to !== 'kube1') {
      throw new Error(`join: ${JSON.stringify(op)}\n${await node.journal()}`);
    }
    return node;
  } catch (err) {
    await node.stop();
    throw err;
  }
}

async function waitHttp(host: RealHost, url: string, what: string, proc: ChildProcess, log: () => string) {
  for (let i = 0; i < 150; i++) {
    // Any HTTP answer means the server is up (curl exits 7 while the port is closed).
    const [file, ...args] = host.inNetns(['curl', '-s', '-o', '/dev/null', url]);
    if ((await run(file as string, args, { timeoutMs: 5_000 })).exitCode === 0) return;
    if (proc.exitCode !== null) break;
    await delay(100);
  }
  throw new Error(`${what} did not come up at ${url}:\n${log()}`);
}

function collect(proc: ChildProcess): () => string {
  let out = '';
  proc.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr?.on('data', (b: Buffer) => (out += b.toString()));
  return () => out;
}

/** Debian's docker-registry, storage in the host's temp dir, on 127.0.0.1:5000 of the netns. */
async function startRegistry(host: RealHost): Promise<ChildProcess> {
  const config = await writeRegistryConfig(host.dir, REGISTRY);
  const proc = host.spawnHelper(['/usr/bin/docker-registry', 'serve', config]);
  await waitHttp(host, `http://${REGISTRY}/v2/`, 'docker-registry', proc, collect(proc));
  return proc;
}

async function pushImages(host: RealHost, layout: string): Promise<void> {
  const policy = path.join(host.dir, 'policy.json');
  await writeFile(policy, JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
  for (const tag of MACHINE_IMAGE_TAGS) {
    const [file, ...args] = host.inNetns([
      'skopeo',
      '--policy',
      policy,
      'copy',
      '--quiet',
      '--dest-tls-verify=false',
      `oci:${layout}:${tag}`,
      `docker://${REGISTRY}/${MACHINE_REPOSITORY}:${tag}`,
    ]);
    await runOk(file as string, args, {
      timeoutMs: 300_000,
      env: { ...process.env, HOME: host.dir, XDG_RUNTIME_DIR: host.dir },
    });
  }
}

/** The sim artifact mirror (kubelet/containerd stand-ins that really serve) on 127.0.0.1:8080. */
async function startMirrorHelper(host: RealHost, unhealthyKubelet?: string): Promise<ChildProcess> {
  const proc = host.spawnHelper(
    [
      process.execPath,
      '--import',
      'tsx',
      path.join(REPO, 'test/support/real-host/mirror-child.ts'),
      '8080',
      unhealthyKubelet ?? '',
    ],
    { cwd: REPO },
  );
  await waitHttp(host, `${MIRROR_URL}/`, 'the artifact mirror', proc, collect(proc));
  return proc;
}

/**
 * The fake API server in the host's network namespace (`kube-child.ts`), its kubeconfig written
 * to CLUSTER_KUBECONFIG in the host before agentd starts (agentd checks `--kubeconfig` at start).
 */
async function startKubeHelper(host: RealHost): Promise<{ proc: ChildProcess; url: string; token: string }> {
  const kubeconfig = path.join(host.rootfs, CLUSTER_KUBECONFIG);
  const proc = host.spawnHelper(
    [
      process.execPath,
      '--import',
      'tsx',
      path.join(REPO, 'test/support/real-host/kube-child.ts'),
      kubeconfig,
    ],
    { cwd: REPO },
  );
  const log = collect(proc);
  let ready: { url: string; token: string } | undefined;
  for (let i = 0; i < 300 && ready === undefined; i++) {
    const line = /^\{"url".*\}$/m.exec(log())?.[0];
    if (line) ready = JSON.parse(line) as { url: string; token: string };
    else if (proc.exitCode !== null) break;
    else await delay(100);
  }
  if (ready === undefined) {
    proc.kill('SIGTERM');
    throw new Error(`the fake API server did not come up:\n${log()}`);
  }
  await waitHttp(host, `${ready.url}/version`, 'the fake API server', proc, log);
  return { proc, ...ready };
}

function clusterAccess(host: RealHost, url: string, token: string): ClusterAccess {
  return {
    request: async <T>(method: string, apiPath: string, body?: unknown) => {
      const type = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
      const [file, ...args] = host.inNetns([
        'curl',
        '-sS',
        '-X',
        method,
        '-H',
        `Authorization: Bearer ${token}`,
        ...(body === undefined ? [] : ['-H', `Content-Type: ${type}`, '--data-binary', '@-']),
        '-w',
        '\n%{http_code}',
        `${url}${apiPath}`,
      ]);
      const res = await run(file as string, args, {
        input: body === undefined ? undefined : JSON.stringify(body),
        timeoutMs: 10_000,
      });
      if (res.exitCode !== 0)
        throw new Error(`curl ${method} ${apiPath}: exit ${res.exitCode}: ${res.stderr}`);
      const cut = res.stdout.lastIndexOf('\n');
      const text = res.stdout.slice(0, cut);
      return { status: Number(res.stdout.slice(cut + 1)), body: (text ? JSON.parse(text) : null) as T };
    },
  };
}
