/**
 * Fixtures for the provisioning tests (integration and system): a `--sim` daemon with explicit
 * temp paths, typed RPC helpers, agent configs that point at a test mirror, applied-config
 * files as the upstream agent leaves them, tree snapshots to prove "nothing changed" and
 * "nothing partial left", and the real docker-registry + skopeo of the system tests.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { lstat, mkdir, readFile, readdir, readlink, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { request } from 'undici';
import type { AgentConfigInput } from '../../src/config/agent-config.js';
import type { MachineName } from '../../src/host/types.js';
import type { ArtifactFault } from '../../src/sim/mirror/artifacts.js';
import { mirrorDownloads } from '../../src/sim/mirror/index.js';
import { createOciImage, type OciImage } from '../../src/sim/mirror/oci-image.js';
import { makeAgentConfig } from './agent-config.js';
import { startTestDaemon, type TestDaemon, type TestDaemonOptions } from './daemon.js';

// ---- system tools -------------------------------------------------------------------------

import { writeRegistryConfig } from './system-tools.js';

export { SYSTEM_TESTS_REQUIRED, hasTool } from './system-tools.js';

// ---- the daemon ---------------------------------------------------------------------------

/**
 * `agentd --sim` (simulated host + its own artifact mirror + the sim default config) with every
 * path explicit in a fresh temp dir; killed and removed when the test ends.
 */
export function startSimDaemon(options: TestDaemonOptions = {}): Promise<TestDaemon> {
  return startTestDaemon({ ...options, args: ['--sim', ...(options.args ?? [])] });
}

/** A JSON-RPC error as it comes off the wire. */
export interface WireError {
  code: number;
  message: string;
  data: { code: string; issues?: Array<{ path: Array<string | number> | string; message: string }> } & Record<
    string,
    unknown
  >;
}

/** An operation as the API returns it (only what these tests read). */
export interface OperationView {
  id: string;
  kind: string;
  state: string;
  from: MachineName | null;
  to: MachineName | null;
  phases: Array<{ name: string; state: string; error: { code: string; message: string } | null }>;
  result: Record<string, unknown> | null;
  error: { code: string; message: string; data?: Record<string, unknown> } | null;
}

/** The `status` result (only what these tests read). */
export interface StatusView {
  node: {
    activeMachine: MachineName | null;
    applied: { kubernetesVersion: string; image: string; hash: string } | null;
    machines: Array<{ name: MachineName; state: string; kubelet: string }>;
    warnings: string[];
  };
}

/** Call `method` and return its result; a JSON-RPC error fails with the daemon's message and logs. */
export async function rpcResult<T = Record<string, unknown>>(
  daemon: TestDaemon,
  method: string,
  params?: unknown,
): Promise<T> {
  const res = await daemon.rpc(method, params);
  if ('error' in res) {
    throw new Error(`${method} answered an error: ${JSON.stringify(res.error)}\n${daemon.logs()}`);
  }
  return res.result as T;
}

/** Call `method` expecting a JSON-RPC error, and return it. */
export async function rpcError(daemon: TestDaemon, method: string, params?: unknown): Promise<WireError> {
  const res = await daemon.rpc(method, params);
  if (!('error' in res)) throw new Error(`${method} succeeded, expected an error: ${JSON.stringify(res)}`);
  return res.error as WireError;
}

/** `update` with `wait: true`: the operation once it has ended. */
export function updateAndWait(
  daemon: TestDaemon,
  params: Record<string, unknown> = {},
): Promise<OperationView> {
  return rpcResult<OperationView>(daemon, 'update', { ...params, wait: true });
}

/** The daemon's `status` result. */
export function nodeStatus(daemon: TestDaemon): Promise<StatusView> {
  return rpcResult<StatusView>(daemon, 'status');
}

/** One phase of an operation (fails the test when the operation has no such phase). */
export function phaseOf(op: OperationView, name: string): OperationView['phases'][number] {
  const p = op.phases.find((x) => x.name === name);
  if (!p) throw new Error(`operation ${op.id} has no phase ${name}: ${JSON.stringify(op.phases)}`);
  return p;
}

/** The value of one Prometheus sample line (`name{labels} value`), or 0 when absent. */
export async function metricValue(daemon: TestDaemon, sample: string): Promise<number> {
  const res = await daemon.http('GET', '/metrics');
  const line = res.body.split('\n').find((l) => l.startsWith(`${sample} `));
  return line ? Number(line.slice(sample.length + 1)) : 0;
}

// ---- agent configs ------------------------------------------------------------------------

/** The repository every image reference on a test mirror uses (any name resolves there). */
export const TEST_IMAGE_REPOSITORY = 'agentd/test-rootfs';

/**
 * A full agent config (input form, as `update`'s `config` takes it) whose downloads and image
 * are on the mirror at `mirror` (`{ url, hostPort }` of `startMirror`).
 */
export function mirrorAgentConfig(
  mirror: { url: string; hostPort: string },
  overrides: Partial<AgentConfigInput> = {},
): AgentConfigInput {
  return makeAgentConfig({
    OCIImage: `${mirror.hostPort}/${TEST_IMAGE_REPOSITORY}:v1`,
    Downloads: mirrorDownloads(mirror.url),
    ...overrides,
  });
}

/** `makeAgentConfig()` without the field at `dotted` (e.g. `Cluster.ClusterDNS`). */
export function configWithout(dotted: string): Record<string, unknown> {
  const config = structuredClone(makeAgentConfig()) as unknown as Record<string, unknown>;
  const keys = dotted.split('.');
  const last = keys.pop() as string;
  let obj = config;
  for (const k of keys) obj = obj[k] as Record<string, unknown>;
  Reflect.deleteProperty(obj, last);
  return config;
}

/** A copy of a config with `Cluster.Version` replaced. */
export function withVersion(config: AgentConfigInput, version: string): AgentConfigInput {
  return { ...config, Cluster: { ...config.Cluster, Version: version } };
}

// ---- host files ---------------------------------------------------------------------------

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** `<root>/etc/unbounded/agent/<m>-applied-config.json`. */
export function appliedConfigPath(root: string, m: MachineName): string {
  return path.join(root, 'etc/unbounded/agent', `${m}-applied-config.json`);
}

/**
 * Write an applied config as the upstream agent does (pretty JSON, mode 0600) with a sidecar:
 * the right digest by default, `sidecar: null` for none, or the given text.
 */
export async function writeAppliedConfig(
  root: string,
  m: MachineName,
  config: unknown,
  options: { sidecar?: string | null } = {},
): Promise<{ file: string; bytes: string; hash: string }> {
  const file = appliedConfigPath(root, m);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const bytes = `${JSON.stringify(config, null, 2)}\n`;
  const hash = sha256Hex(bytes);
  await writeFile(file, bytes, { mode: 0o600 });
  const sidecar = options.sidecar === undefined ? `${hash}\n` : options.sidecar;
  if (sidecar !== null) await writeFile(`${file}.sha256`, sidecar, { mode: 0o600 });
  return { file, bytes, hash };
}

/**
 * The simulated host's own bookkeeping under the root (its model of machined and systemd):
 * left out when comparing what agentd did to the host's files.
 */
export const SIM_HOST_STATE = 'var/lib/agentd-sim';

export async function exists(p: string): Promise<boolean> {
  return lstat(p).then(
    () => true,
    () => false,
  );
}

/**
 * Every entry under `dir`, keyed by relative path: `dir <mode>`, `link -> <target>`, or
 * `file <mode> <sha256>`. Two equal snapshots mean nothing was created, removed or changed.
 * `ignore` skips relative paths equal to or under any of its entries; `dirs: false` leaves
 * directories out (only files and links are compared).
 */
export async function snapshotTree(
  dir: string,
  options: { ignore?: readonly string[]; dirs?: boolean } = {},
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    const full = path.join(e.parentPath, e.name);
    const rel = path.relative(dir, full);
    if (options.ignore?.some((p) => rel === p || rel.startsWith(`${p}/`))) continue;
    const st = await lstat(full);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isDirectory()) {
      if (options.dirs !== false) out[rel] = `dir ${mode}`;
    } else if (st.isSymbolicLink()) out[rel] = `link -> ${await readlink(full)}`;
    else out[rel] = `file ${mode} ${sha256Hex(await readFile(full))}`;
  }
  return out;
}

/**
 * Files under a content-addressed cache (`<dir>/**\/sha256/<hex>`) that are not a complete,
 * verified entry: temp or partial files, or an entry whose bytes do not hash to its name.
 */
export async function badCacheEntries(dir: string): Promise<string[]> {
  const bad: string[] = [];
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    if (e.isDirectory()) continue;
    const full = path.join(e.parentPath, e.name);
    const named = path.basename(path.dirname(full)) === 'sha256' && /^[0-9a-f]{64}$/.test(e.name);
    if (!named || !e.isFile() || sha256Hex(await readFile(full)) !== e.name) {
      bad.push(path.relative(dir, full));
    }
  }
  return bad.sort();
}

// ---- download faults ---------------------------------------------------------------------

/** A download failure injected on the mirror, and the error code the operation must end with. */
export interface DownloadFaultCase {
  name: string;
  fault: ArtifactFault;
  code: 'CHECKSUM_MISMATCH' | 'DOWNLOAD_FAILED';
  /** Transient: the download is retried (4 retries by default) before the operation fails. */
  attempts: number;
}

const KUBELET = /\/kubelet$/;

/**
 * Failures of the kubelet download, on GET only (preflight's HEAD requests still succeed, so
 * each one fails in `provision`, after the image is already unpacked into the target).
 */
export const KUBELET_DOWNLOAD_FAULTS: readonly DownloadFaultCase[] = [
  {
    name: 'a checksum mismatch',
    fault: { path: /\/kubelet\.sha256$/, kind: 'wrong-checksum', method: 'GET' },
    code: 'CHECKSUM_MISMATCH',
    attempts: 1,
  },
  {
    name: 'a truncated download',
    fault: { path: KUBELET, kind: 'truncate', method: 'GET' },
    code: 'DOWNLOAD_FAILED',
    attempts: 5,
  },
  {
    name: 'a 404 from the mirror',
    fault: { path: KUBELET, kind: 'status', status: 404, method: 'GET' },
    code: 'DOWNLOAD_FAILED',
    attempts: 1,
  },
  {
    name: 'a 500 from the mirror',
    fault: { path: KUBELET, kind: 'status', status: 500, method: 'GET' },
    code: 'DOWNLOAD_FAILED',
    attempts: 5,
  },
];

/** How many GETs of the kubelet binary itself the mirror saw. */
export function kubeletGets(requests: ReadonlyArray<{ method: string; path: string }>): number {
  return requests.filter((r) => r.method === 'GET' && KUBELET.test(r.path)).length;
}

// ---- images -------------------------------------------------------------------------------

/** Debian's busybox-static: a static binary an nspawn container can run with nothing else. */
export const BUSYBOX = '/bin/busybox';

/** The sim image plus `bin/busybox` and `bin/sh -> busybox`, so the rootfs can run shell scripts. */
export function busyboxImage(): OciImage {
  return createOciImage({
    extraFiles: [
      { path: 'bin/busybox', content: readFileSync(BUSYBOX), mode: 0o755 },
      { path: 'bin/sh', type: 'symlink', linkTarget: 'busybox' },
    ],
  });
}

// ---- a real registry (system tests) -------------------------------------------------------

export const REGISTRY_BIN = '/usr/bin/docker-registry';

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

export interface RealRegistry {
  /** `127.0.0.1:<port>` */
  host: string;
  logs(): string;
  stop(): Promise<void>;
}

/** Debian's docker-registry on 127.0.0.1 with its own config file and storage under `dir`. */
export async function startDockerRegistry(dir: string, o: { htpasswd?: string } = {}): Promise<RealRegistry> {
  const host = `127.0.0.1:${await freePort()}`;
  const config = await writeRegistryConfig(dir, host, o.htpasswd);
  const proc: ChildProcess = spawn(REGISTRY_BIN, ['serve', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout?.on('data', (b: Buffer) => (log += b.toString()));
  proc.stderr?.on('data', (b: Buffer) => (log += b.toString()));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    await exited;
  };
  // A real process starts in real time: poll /v2/ (bounded) until it answers.
  for (let i = 0; ; i++) {
    const ok = await request(`http://${host}/v2/`)
      .then(async (res) => {
        await res.body.dump();
        // With htpasswd auth an anonymous /v2/ is refused: the registry is up all the same.
        return res.statusCode === 200 || (o.htpasswd !== undefined && res.statusCode === 401);
      })
      .catch(() => false);
    if (ok) break;
    if (i > 100 || proc.exitCode !== null) {
      await stop();
      throw new Error(`docker-registry did not come up on ${host}:\n${log}`);
    }
    await delay(100);
  }
  return { host, logs: () => log, stop };
}

/** `skopeo copy --all --dest-tls-verify=false oci:<layout>:<tag> docker://<dest>`; throws with skopeo's stderr. */
export async function skopeoPush(
  workDir: string,
  layout: string,
  tag: string,
  dest: string,
  /** `user:password` for a registry with auth. */
  creds?: string,
): Promise<void> {
  const policy = path.join(workDir, 'policy.json');
  await writeFile(policy, JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
  const copy = spawnSync(
    'skopeo',
    [
      '--policy',
      policy,
      'copy',
      '--all',
      '--dest-tls-verify=false',
      ...(creds ? ['--dest-creds', creds] : []),
      `oci:${layout}:${tag}`,
      `docker://${dest}`,
    ],
    {
      encoding: 'utf8',
      env: { ...process.env, HOME: workDir, XDG_RUNTIME_DIR: workDir },
      timeout: 60_000,
    },
  );
  if (copy.status !== 0) throw new Error(`skopeo copy failed (${copy.status}): ${copy.stderr}`);
}
