/**
 * A simulated node for the update tests: one temp dir holding the daemon's socket, PID file,
 * state dir and `--root`, on which the real daemon (`test/support/daemon.ts`) is started,
 * killed and restarted with faults and failpoints, and whose host files the tests inspect.
 *
 * Daemons run with `--host sim --sim` and explicit paths, so they get the local mirror and the
 * sim default config (a bare `update` joins) while every path stays in the temp dir.
 */
import { createHash } from 'node:crypto';
import { cp, lstat, mkdtemp, readFile, readdir, readlink, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { requestUnix, startTestDaemon, type TestDaemon } from './daemon.js';

export type Machine = 'kube1' | 'kube2';
export const MACHINES: readonly Machine[] = ['kube1', 'kube2'];
export const other = (m: Machine): Machine => (m === 'kube1' ? 'kube2' : 'kube1');

/** The sim default config's version (what a bare `update` joins with). */
export const JOIN_VERSION = '1.34.0';
/** The sim default config's bootstrap token (a secret: never in an answer). */
export const SIM_BOOTSTRAP_TOKEN = 'simsim.0123456789abcdef';

/** A JSON-RPC error as the daemon sends it. */
export interface WireError {
  code: number;
  message: string;
  data: { code: string } & Record<string, unknown>;
}

/** An operation as the API returns it (only the fields the tests read are typed). */
export interface Op {
  id: string;
  kind: string;
  state: string;
  from: Machine | null;
  to: Machine | null;
  idempotencyKey: string | null;
  phases: Array<{ name: string; state: string; error: { code: string; message: string } | null }>;
  result: Record<string, unknown> | null;
  error: { code: string; message: string; data?: Record<string, unknown> } | null;
}

export interface NodeStatusAnswer {
  node: {
    activeMachine: Machine | null;
    applied: { kubernetesVersion: string; image: string; hash: string } | null;
    machines: Array<{ name: Machine; state: string; kubelet: string }>;
    warnings: string[];
    warningDetails: Array<{ code: string; message: string } & Record<string, unknown>>;
  };
  operation: Op | null;
}

/** Thrown by `call` when the daemon answers with an error. */
export class RpcCallError extends Error {
  constructor(
    readonly method: string,
    readonly error: WireError,
  ) {
    super(`${method}: ${error.message} (${error.data?.code ?? error.code})`);
  }
}

export interface StartOptions {
  /** `AGENTD_SIM_FAULTS`. */
  faults?: string;
  /** `AGENTD_FAILPOINTS`. */
  failpoints?: string;
  /** More environment (HTTPS_PROXY, …). */
  env?: Record<string, string>;
  /** More agentd flags, after `--sim`. */
  args?: string[];
}

export class SimNode {
  daemon: TestDaemon | null = null;

  constructor(readonly dir: string) {}

  get socket(): string {
    return path.join(this.dir, 'agentd.sock');
  }
  get stateDir(): string {
    return path.join(this.dir, 'state');
  }
  get root(): string {
    return path.join(this.dir, 'root');
  }

  // ---- host paths (docs/compatibility.md's layout, spelled out rather than imported from src) --------

  machineDir(m: Machine): string {
    return path.join(this.root, 'var/lib/machines', m);
  }
  nspawnFile(m: Machine): string {
    return path.join(this.root, 'etc/systemd/nspawn', `${m}.nspawn`);
  }
  dropIn(m: Machine): string {
    return path.join(this.root, `etc/systemd/system/systemd-nspawn@${m}.service.d/override.conf`);
  }
  appliedConfig(m: Machine): string {
    return path.join(this.root, 'etc/unbounded/agent', `${m}-applied-config.json`);
  }
  get journalFile(): string {
    return path.join(this.stateDir, 'journal.json');
  }
  get simStateFile(): string {
    return path.join(this.root, 'var/lib/agentd-sim/state.json');
  }

  // ---- the daemon ---------------------------------------------------------------------------

  /** Start the daemon on this node and wait until it is ready (recovery done). */
  async start(options: StartOptions = {}): Promise<TestDaemon> {
    if (this.daemon && this.daemon.proc.exitCode === null && this.daemon.proc.signalCode === null) {
      throw new Error('the node already has a running daemon');
    }
    const env: Record<string, string> = { ...options.env };
    if (options.faults) env.AGENTD_SIM_FAULTS = options.faults;
    if (options.failpoints) env.AGENTD_FAILPOINTS = options.failpoints;
    this.daemon = await startTestDaemon({ dir: this.dir, args: ['--sim', ...(options.args ?? [])], env });
    return this.daemon;
  }

  #d(): TestDaemon {
    if (!this.daemon) throw new Error('no daemon started on this node');
    return this.daemon;
  }

  /** SIGTERM and expect a clean exit. */
  async stop(): Promise<void> {
    expect(await this.#d().stop('SIGTERM'), this.#d().logs()).toBe(0);
  }

  /** Wait for the daemon to die by SIGKILL (a failpoint). */
  async waitKilled(): Promise<void> {
    const d = this.#d();
    await d.waitExit();
    expect(d.proc.signalCode, `expected the daemon to be killed by a failpoint:\n${d.logs()}`).toBe(
      'SIGKILL',
    );
  }

  /** The raw JSON-RPC response. */
  rpc(method: string, params?: unknown): Promise<Record<string, unknown>> {
    return this.#d().rpc(method, params);
  }

  /** The result, or `RpcCallError` with the wire error. */
  async call<T = unknown>(method: string, params?: unknown): Promise<T> {
    const res = await this.rpc(method, params);
    if (res.error) throw new RpcCallError(method, res.error as WireError);
    return res.result as T;
  }

  /** The wire error of a call that must fail. */
  async callError(method: string, params?: unknown): Promise<WireError> {
    const res = await this.rpc(method, params);
    expect(res.error, `${method} was expected to fail, got ${JSON.stringify(res.result)}`).toBeDefined();
    return res.error as WireError;
  }

  update(params: Record<string, unknown>): Promise<Op> {
    return this.call<Op>('update', params);
  }

  status(): Promise<NodeStatusAnswer> {
    return this.call<NodeStatusAnswer>('status');
  }

  async operations(): Promise<Op[]> {
    return (await this.call<{ operations: Op[] }>('operations.list', { limit: 1000 })).operations;
  }

  /** Join the node with the sim default config (kube1, 1.34.0) and check it succeeded. */
  async join(): Promise<Op> {
    const op = await this.update({ wait: true });
    expect(op.state, JSON.stringify(op)).toBe('succeeded');
    expect(op.to).toBe('kube1');
    // The join's changes list every field of the config: the bootstrap token must be redacted.
    expect(JSON.stringify(op)).not.toContain(SIM_BOOTSTRAP_TOKEN);
    return op;
  }

  // ---- files --------------------------------------------------------------------------------

  async readJournal(): Promise<Record<string, unknown>> {
    return JSON.parse(await readFile(this.journalFile, 'utf8')) as Record<string, unknown>;
  }

  /** The applied config of `m`, checked against its `.sha256` sidecar (sha256 of the file bytes). */
  async readVerifiedApplied(m: Machine): Promise<{ Cluster: { Version: string }; OCIImage: string }> {
    const bytes = await readFile(this.appliedConfig(m));
    const sidecar = await readFile(`${this.appliedConfig(m)}.sha256`, 'utf8');
    expect(sidecar).toBe(`${sha256(bytes)}\n`);
    return JSON.parse(bytes.toString('utf8')) as { Cluster: { Version: string }; OCIImage: string };
  }
}

export function sha256(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

export async function exists(p: string): Promise<boolean> {
  try {
    await lstat(p);
    return true;
  } catch {
    return false;
  }
}

/** Remove the node's dir once the daemon is gone. */
async function disposeNode(node: SimNode): Promise<void> {
  await node.daemon?.kill();
  await rm(node.dir, { recursive: true, force: true });
}

/**
 * A fresh node in a new temp dir. Inside a test it is disposed when the test ends; outside one
 * (a `beforeAll` template) the caller disposes it with `disposeSimNode`.
 */
export async function createSimNode(): Promise<SimNode> {
  const node = new SimNode(await mkdtemp(path.join(os.tmpdir(), 'agentd-node-')));
  try {
    // Kill first, then remove: the daemon must not be writing into the dir as it goes.
    onTestFinished(() => disposeNode(node));
  } catch {
    // Not inside a test: the caller disposes.
  }
  return node;
}

export const disposeSimNode = disposeNode;

/**
 * A copy of a stopped node (its state dir, root and config file), so a test can start from a
 * joined node without joining again. The copy keeps the template's recorded mirror port, so
 * copies of one template must not run at the same time.
 */
export async function cloneSimNode(template: SimNode): Promise<SimNode> {
  if (template.daemon && template.daemon.proc.exitCode === null && template.daemon.proc.signalCode === null) {
    throw new Error('stop the template node before cloning it');
  }
  const node = await createSimNode();
  await cp(template.dir, node.dir, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
  return node;
}

/**
 * A digest of every entry under `dir`: relative path, type, mode, and content (file bytes or
 * link target), sorted — two equal digests mean the tree is byte-for-byte the same.
 * `skip` gets the relative path (with `/`) and leaves out matching entries (and what is below).
 */
export async function treeDigest(
  dir: string,
  skip: (rel: string) => boolean = () => false,
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (rel: string): Promise<void> => {
    const abs = path.join(dir, rel);
    const st = await lstat(abs);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isSymbolicLink()) {
      out.set(rel, `link ${mode} ${await readlink(abs)}`);
    } else if (st.isDirectory()) {
      out.set(rel || '.', `dir ${mode}`);
      for (const name of (await readdir(abs)).sort()) {
        const child = rel ? `${rel}/${name}` : name;
        if (!skip(child)) await walk(child);
      }
    } else if (st.isFile()) {
      out.set(rel, `file ${mode} ${sha256(await readFile(abs))}`);
    } else {
      out.set(rel, `other ${mode}`);
    }
  };
  await walk('');
  return out;
}

/** The simulated host's model of the machines (daemon-reload counts left out). */
export async function simMachines(node: SimNode): Promise<unknown> {
  if (!(await exists(node.simStateFile))) return null;
  return (JSON.parse(await readFile(node.simStateFile, 'utf8')) as { machines: unknown }).machines;
}

// ---- server-sent events ---------------------------------------------------------------------

export interface EngineEventFrame {
  type: string;
  operationId?: string;
  phase?: string;
  state?: string;
  operation?: Op;
}

export interface EventFollower {
  /** Resolves with the first event (seen so far or later) that matches. */
  next(match: (e: EngineEventFrame) => boolean): Promise<EngineEventFrame>;
  close(): void;
}

/** Follow `/v1/events` on the daemon's socket; resolves once the stream is open. */
export function followEvents(socket: string): Promise<EventFollower> {
  return new Promise((resolve, reject) => {
    const seen: EngineEventFrame[] = [];
    const waiters: Array<{
      match: (e: EngineEventFrame) => boolean;
      resolve: (e: EngineEventFrame) => void;
    }> = [];
    let buffer = '';
    const req = http.get({ socketPath: socket, path: '/v1/events' }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame
            .split('\n')
            .filter((l) => l.startsWith('data: '))
            .map((l) => l.slice(6))
            .join('\n');
          if (!data) continue;
          const event = JSON.parse(data) as EngineEventFrame;
          seen.push(event);
          for (const w of [...waiters]) {
            if (w.match(event)) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve(event);
            }
          }
        }
      });
      res.on('error', () => undefined);
      resolve({
        next: (match) => {
          const found = seen.find(match);
          if (found) return Promise.resolve(found);
          return new Promise((r) => waiters.push({ match, resolve: r }));
        },
        close: () => req.destroy(),
      });
    });
    req.on('error', reject);
  });
}

/**
 * Poll `probe` every 10 ms until it is true (for state another process changes; fails after
 * 30 s: a bound for a loaded CI machine, not a speed claim). `what` may be a function, read when
 * the wait fails, so that the error says what was seen then.
 */
export async function waitFor(what: string | (() => string), probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await probe())) {
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** GET /readyz (200 once recovery is done). */
export async function readyz(node: SimNode): Promise<number> {
  return (await requestUnix(node.socket, 'GET', '/readyz')).status;
}

// ---- crash and recovery -------------------------------------------------------------------

/** Where recovery must leave the node: the one active machine (null: none) and its version. */
export interface RecoveredNode {
  active: Machine | null;
  version: string | null;
  /** The codes of the warnings status shows (default none). */
  warnings?: string[];
}

/**
 * Start the daemon with `failpoint` armed, run `trigger` (an update or reset, not waited
 * for), expect the daemon to die by SIGKILL with its journal open, restart it without
 * failpoints and return once it is ready again (recovery has run).
 */
export async function crashAndRestart(
  node: SimNode,
  failpoint: string,
  trigger: (node: SimNode) => Promise<unknown>,
  args: string[] = [],
): Promise<void> {
  await node.start({ failpoints: failpoint, args });
  // The daemon may die before it answers: the answer does not matter, the journal does.
  await trigger(node).catch(() => undefined);
  await node.waitKilled();
  expect(node.daemon?.logs()).toContain(`failpoint ${failpoint}`);
  const journal = await node.readJournal();
  expect(journal.closed, 'the crash must leave the journal open').toBe(false);
  await node.start({ args });
}

/**
 * The node has exactly one machine, the active one, running with kubelet active, its applied
 * config and sidecar valid and on `want.version`, and nothing left of the other machine (no
 * rootfs, nspawn files, applied config or machined registration). `active: null`: no machine.
 */
export async function expectSingleMachine(node: SimNode, want: RecoveredNode): Promise<void> {
  const { node: status } = await node.status();
  expect(status.activeMachine).toBe(want.active);
  expect(
    status.warningDetails.map((w) => w.code),
    status.warnings.join('\n'),
  ).toEqual(want.warnings ?? []);
  const running = status.machines.filter((m) => m.state === 'running');
  expect(running).toEqual(want.active ? [{ name: want.active, state: 'running', kubelet: 'active' }] : []);

  const gone = want.active ? [other(want.active)] : [...MACHINES];
  for (const m of gone) {
    expect(status.machines.find((s) => s.name === m)?.state, `${m} in status`).toBe('absent');
    for (const file of [
      node.machineDir(m),
      node.nspawnFile(m),
      node.dropIn(m),
      node.appliedConfig(m),
      `${node.appliedConfig(m)}.sha256`,
    ]) {
      expect(await exists(file), `${file} must be gone`).toBe(false);
    }
  }
  const sim = (await simMachines(node)) as Record<Machine, { registration: string }> | null;
  if (sim) for (const m of gone) expect(sim[m].registration, `${m} in machined`).toBe('none');

  if (want.active) {
    const applied = await node.readVerifiedApplied(want.active);
    expect(applied.Cluster.Version).toBe(want.version);
    expect(status.applied?.kubernetesVersion).toBe(want.version);
    expect(status.applied?.hash).toBe(sha256(await readFile(node.appliedConfig(want.active))));
  } else {
    expect(status.applied).toBeNull();
  }
}

/**
 * The recovered node as docs/architecture.md requires it (see `expectSingleMachine`), the interrupted
 * operation marked `interrupted` with recovery's outcome, and the journal closed with that
 * outcome. Returns the operation.
 */
export async function expectRecovered(node: SimNode, want: RecoveredNode): Promise<Op> {
  expect(await readyz(node)).toBe(200);
  await expectSingleMachine(node, want);

  const ops = await node.operations();
  const interrupted = ops.filter((o) => o.state === 'interrupted');
  expect(interrupted, JSON.stringify(ops.map((o) => [o.id, o.state]))).toHaveLength(1);
  const op = interrupted[0]!;
  expect(ops[0]?.id, 'the interrupted operation is the newest').toBe(op.id);
  const recovery = op.result?.recovery as { outcome: string; activeMachine: Machine | null } | undefined;
  expect(recovery?.outcome).toEqual(expect.any(String));
  expect(recovery?.activeMachine).toBe(want.active);
  expect(op.error, 'recovery succeeded').toBeNull();
  expect(op.phases.filter((p) => p.state === 'running' || p.state === 'pending')).toEqual([]);

  const journal = await node.readJournal();
  expect(journal).toMatchObject({
    operationId: op.id,
    closed: true,
    outcome: `interrupted: ${recovery?.outcome}`,
  });
  return op;
}

/** The version the crash and rollback tests update a joined node to. */
export const NEW_VERSION = '1.35.0';

/** A joined, stopped node to clone (for `beforeAll`; release it with `disposeSimNode`). */
export async function createJoinedTemplate(): Promise<SimNode> {
  const node = await createSimNode();
  await node.start();
  await node.join();
  await node.stop();
  return node;
}

/** One row of the crash matrix: where the daemon dies during kube1 → kube2. */
export interface UpdateCrashCase {
  failpoint: string;
  /** The phase the journal was in (what recovery reports as `interruptedIn`). */
  phase: string;
  /** Whether the journal had committed the switch: recovery then goes forward to kube2. */
  committed: boolean;
  /** The switch order (`--switch-order`; default standby, the daemon's default). */
  order?: 'standby' | 'cold';
}

/** Crash a clone of `template` during an update to NEW_VERSION and check what recovery left. */
export async function runUpdateCrashCase(template: SimNode, c: UpdateCrashCase): Promise<void> {
  const node = await cloneSimNode(template);
  const args = c.order === 'cold' ? ['--switch-order', 'cold'] : [];
  await crashAndRestart(
    node,
    c.failpoint,
    (n) => n.update({ set: { kubernetesVersion: NEW_VERSION } }),
    args,
  );
  const op = await expectRecovered(
    node,
    c.committed ? { active: 'kube2', version: NEW_VERSION } : { active: 'kube1', version: JOIN_VERSION },
  );
  expect(op).toMatchObject({ kind: 'update', from: 'kube1', to: 'kube2' });
  const recovery = op.result?.recovery as { interruptedIn: string; outcome: string };
  expect(recovery.interruptedIn).toBe(c.phase);
  expect(recovery.outcome).toBe(c.committed ? 'completed the switch to kube2' : 'rolled back to kube1');
}

/**
 * A describe block of crash-matrix rows: one joined template node for the block (cloned per
 * row), each row run by `runUpdateCrashCase`. `more` adds tests that use the same template.
 */
export function describeUpdateCrashes(
  title: string,
  cases: readonly UpdateCrashCase[],
  more?: (template: () => SimNode) => void,
): void {
  describe(title, () => {
    let template: SimNode;
    beforeAll(async () => {
      template = await createJoinedTemplate();
    });
    afterAll(async () => {
      await disposeSimNode(template);
    });
    it.each(cases.map((c) => ({ order: 'standby' as const, ...c })))('$failpoint ($order)', async (c) => {
      await runUpdateCrashCase(template, c);
    });
    more?.(() => template);
  });
}
