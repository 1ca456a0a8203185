/**
 * Real resource faults for the fault matrix (docs/operations.md, "A full disk, exhausted
 * descriptors"): a sim node whose state dir is a small tmpfs of its own, filled to ENOSPC at a
 * chosen moment, and a daemon whose RLIMIT_NOFILE is lowered (prlimit) to the descriptors it
 * holds. The moment is a `stop:<failpoint>`: the daemon SIGSTOPs itself there, the test
 * applies the fault, then SIGCONTs it. Needs root (mount, prlimit).
 */
import { execFile } from 'node:child_process';
import { mkdir, open, readFile, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { startTestDaemon, type TestDaemon } from './daemon.js';
import { readyz, waitFor, type Machine, type Op, type SimNode } from './sim-node.js';

const run = promisify(execFile);

export type Fault = 'disk-full' | 'descriptors';
export const FAULTS: readonly Fault[] = ['disk-full', 'descriptors'];

/** Whether this process may mount a tmpfs and change another process's limits. */
export const canFault = process.getuid?.() === 0;

/** Move the node's state dir onto a tmpfs of its own: what it holds now plus `marginBytes`. */
export async function mountStateTmpfs(
  node: SimNode,
  marginBytes = 48 * 1024 * 1024,
): Promise<() => Promise<void>> {
  const used = Number((await run('du', ['-sb', node.stateDir])).stdout.split(/\s/)[0]);
  const aside = `${node.stateDir}.aside`;
  await rename(node.stateDir, aside);
  await mkdir(node.stateDir, { mode: 0o700 });
  await run('mount', [
    '-t',
    'tmpfs',
    '-o',
    `size=${used * 2 + marginBytes},mode=0700`,
    'tmpfs',
    node.stateDir,
  ]);
  await run('cp', ['-a', `${aside}/.`, node.stateDir]);
  await rm(aside, { recursive: true, force: true });
  return async () => {
    await node.daemon?.kill();
    await run('umount', ['-l', node.stateDir]).catch(() => undefined);
  };
}

/** Fill the file system of `dir` to ENOSPC with `<dir>/fill`; returns a function that frees it. */
export async function fillDisk(dir: string): Promise<() => Promise<void>> {
  const file = path.join(dir, 'fill');
  const handle = await open(file, 'w');
  try {
    for (const size of [1024 * 1024, 4096, 1]) {
      const chunk = Buffer.alloc(size);
      for (;;) {
        try {
          await handle.write(chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw err;
        }
      }
    }
  } finally {
    await handle.close();
  }
  return () => rm(file, { force: true });
}

/**
 * Lower the daemon's RLIMIT_NOFILE to its lowest free descriptor number, so that no new one
 * can be opened; returns a function that gives the old limit back.
 */
export async function exhaustDescriptors(pid: number): Promise<() => Promise<void>> {
  const limits = await readFile(`/proc/${pid}/limits`, 'utf8');
  const m = /^Max open files\s+(\d+)\s+(\d+)/m.exec(limits);
  if (!m) throw new Error(`no open-files limit in /proc/${pid}/limits`);
  const [, soft, hard] = m;
  // The kernel gives the lowest free descriptor number, and refuses one at or above the soft
  // limit: a limit at the lowest free number leaves none free (the count would leave the holes).
  const held = new Set((await readdir(`/proc/${pid}/fd`)).map(Number));
  let lowestFree = 0;
  while (held.has(lowestFree)) lowestFree++;
  await run('prlimit', ['--pid', String(pid), `--nofile=${lowestFree}:${hard}`]);
  return async () => {
    await run('prlimit', ['--pid', String(pid), `--nofile=${soft}:${hard}`]);
  };
}

/** Apply `fault` to the node's daemon (stopped at its failpoint); returns the undo. */
export async function applyFault(node: SimNode, fault: Fault): Promise<() => Promise<void>> {
  const d = node.daemon as TestDaemon;
  return fault === 'disk-full' ? fillDisk(node.stateDir) : exhaustDescriptors(d.pid);
}

/** Wait until the process is stopped (SIGSTOP from a `stop:` failpoint). */
export async function waitStopped(d: TestDaemon, point: string): Promise<void> {
  await waitFor(`agentd to stop at ${point}\n${d.logs()}`, async () => {
    if (d.proc.exitCode !== null || d.proc.signalCode !== null)
      throw new Error(`agentd exited:\n${d.logs()}`);
    const st = await readFile(`/proc/${d.pid}/stat`, 'utf8').catch(() => '');
    return /\) [Tt] /.test(st);
  });
}

/** Wait for a log line of the daemon (no socket needed: descriptors may be exhausted). */
export async function waitLog(
  d: TestDaemon,
  what: string,
  match: (line: Record<string, unknown>) => boolean,
): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    for (const line of d.logs().split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        if (match(JSON.parse(line) as Record<string, unknown>)) return;
      } catch {
        // not a JSON line
      }
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${d.logs()}`);
    if (d.proc.exitCode !== null || d.proc.signalCode !== null)
      throw new Error(`agentd exited:\n${d.logs()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Start the daemon without waiting for ready (it is to stop during recovery). */
export async function startUnready(node: SimNode, failpoints: string, faults?: string): Promise<TestDaemon> {
  node.daemon = await startTestDaemon({
    dir: node.dir,
    args: ['--sim'],
    env: { AGENTD_FAILPOINTS: failpoints, ...(faults ? { AGENTD_SIM_FAULTS: faults } : {}) },
    waitReady: false,
  });
  return node.daemon;
}

/** The record of `id` as written on disk. */
export async function recordOnDisk(node: SimNode, id: string): Promise<Op | null> {
  try {
    return JSON.parse(await readFile(path.join(node.stateDir, 'operations', `${id}.json`), 'utf8')) as Op;
  } catch {
    return null;
  }
}

/**
 * After a cell, once the fault is gone: one machine serves (`active`), no other runs; the
 * operation's end is written on disk as agentd reports it, with no phase still running; the
 * journal is closed; nothing is owed and the reserve is whole again (status catches up in
 * the background: polled).
 */
export async function expectCaughtUp(node: SimNode, opId: string, active: Machine): Promise<Op> {
  const d = node.daemon as TestDaemon;
  await waitFor(
    () =>
      `agentd to be ready (pid ${d.pid}, exit code ${d.proc.exitCode}, signal ${d.proc.signalCode}):\n${d.logs()}`,
    async () => (await readyz(node).catch(() => 0)) === 200,
  );
  let status = await node.status();
  await waitFor(
    `owed writes and the reserve caught up: ${JSON.stringify(status.node.warnings)}`,
    async () => {
      status = await node.status();
      const disk = await recordOnDisk(node, opId);
      return status.node.warnings.length === 0 && disk !== null && disk.state !== 'running';
    },
  );
  expect(status.node.activeMachine).toBe(active);
  const ended = await node.call<Op>('operations.get', { id: opId });
  expect(
    status.node.machines.filter((m) => m.state === 'running'),
    `${JSON.stringify(ended)}\n${node.daemon?.logs() ?? ''}`,
  ).toEqual([{ name: active, state: 'running', kubelet: 'active' }]);
  const op = await node.call<Op>('operations.get', { id: opId });
  expect(op.phases.filter((p) => p.state === 'running' || p.state === 'pending')).toEqual([]);
  const disk = await recordOnDisk(node, opId);
  expect(disk?.state).toBe(op.state);
  const journal = await node.readJournal();
  expect(journal).toMatchObject({ operationId: opId, closed: true });
  const reserve = await stat(path.join(node.stateDir, 'space-reserve'));
  expect(reserve.size).toBe(1024 * 1024);
  return op;
}
