/**
 * Real resource faults on a real systemd host (docs/operations.md, "A full disk, exhausted
 * descriptors"; issue 40), the real-host side of test/support/fault-node.ts: /var/lib/agentd on a
 * small tmpfs of its own, filled to ENOSPC at a chosen moment, and agentd's RLIMIT_NOFILE lowered
 * (prlimit, in the host) to its lowest free descriptor number. The moment is a failpoint armed
 * through a unit drop-in (`AGENTD_FAILPOINTS`): `stop:<point>` makes agentd SIGSTOP itself there,
 * the test applies the fault, then sends SIGCONT. agentd's socket may not answer while its
 * descriptors are gone, so the end of an operation is read from its journal in journald.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { expect } from 'vitest';
import type { OperationJson, StatusJson } from './assert-node.js';
import type { RealNode } from './node.js';

export {
  agentdUnit,
  armFailpoints,
  disarmFailpoints,
  resume,
  setSwitchOrder,
  waitStopped,
} from './agentd-unit.js';

export type Fault = 'disk-full' | 'descriptors';
export const FAULTS: readonly Fault[] = ['disk-full', 'descriptors'];

const STATE_DIR = '/var/lib/agentd';

/** Move /var/lib/agentd onto a tmpfs of its own: what it holds now and room for an update. */
export async function mountStateTmpfs(node: RealNode): Promise<void> {
  await node.host.execOk(['systemctl', 'stop', 'agentd.service']);
  await node.host.execOk([
    'bash',
    '-c',
    [
      'set -e',
      `used=$(du -sb ${STATE_DIR} | cut -f1)`,
      `mv ${STATE_DIR} ${STATE_DIR}.aside`,
      `mkdir -m 0700 ${STATE_DIR}`,
      `mount -t tmpfs -o size=$((used * 2 + 64 * 1024 * 1024)),mode=0700 tmpfs ${STATE_DIR}`,
      `cp -a ${STATE_DIR}.aside/. ${STATE_DIR}/`,
      `rm -rf ${STATE_DIR}.aside`,
    ].join('; '),
  ]);
  await node.host.execOk(['systemctl', 'start', 'agentd.service']);
  await node.waitReady();
}

/** Fill the file system of /var/lib/agentd to ENOSPC; returns the undo. */
async function fillStateDisk(node: RealNode): Promise<() => Promise<void>> {
  for (const bs of ['1M', '4k', '1']) {
    const dd = await node.host.exec([
      'dd',
      'if=/dev/zero',
      `of=${STATE_DIR}/fill`,
      `bs=${bs}`,
      'oflag=append',
      'conv=notrunc',
      'status=none',
    ]);
    expect(dd.stderr).toMatch(/No space left on device/);
  }
  return async () => {
    await node.host.execOk(['rm', '-f', `${STATE_DIR}/fill`]);
  };
}

/**
 * Lower `pid`'s RLIMIT_NOFILE to its lowest free descriptor number (the kernel refuses a
 * descriptor at or above the soft limit, and gives the lowest free one: a limit at the count
 * would leave the holes below it free); returns the undo.
 */
async function exhaustDescriptors(node: RealNode, pid: number): Promise<() => Promise<void>> {
  const limits = (await node.host.execOk(['cat', `/proc/${pid}/limits`])).stdout;
  const m = /^Max open files\s+(\d+)\s+(\d+)/m.exec(limits);
  if (!m) throw new Error(`no open-files limit in /proc/${pid}/limits`);
  const [, soft, hard] = m;
  const fds = (await node.host.execOk(['ls', `/proc/${pid}/fd`])).stdout;
  const held = new Set(fds.split(/\s+/).filter(Boolean).map(Number));
  let lowestFree = 0;
  while (held.has(lowestFree)) lowestFree++;
  await node.host.execOk(['prlimit', '--pid', String(pid), `--nofile=${lowestFree}:${hard}`]);
  return async () => {
    // The process may have been restarted meanwhile: then the new one has its own limits.
    await node.host.exec(['prlimit', '--pid', String(pid), `--nofile=${soft}:${hard}`]);
  };
}

/** Apply `fault` to agentd, stopped at its failpoint as `pid`; returns the undo. */
export function applyFault(node: RealNode, fault: Fault, pid: number): Promise<() => Promise<void>> {
  return fault === 'disk-full' ? fillStateDisk(node) : exhaustDescriptors(node, pid);
}

/** The JSON log lines of agentd's process `pid` (journald; no socket needed). */
async function logLines(node: RealNode, pid: number): Promise<Array<Record<string, unknown>>> {
  const res = await node.host.exec(['journalctl', `_PID=${pid}`, '-o', 'cat', '--no-pager']);
  const lines: Array<Record<string, unknown>> = [];
  for (const line of res.stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // not a JSON line
    }
  }
  return lines;
}

/** Wait until agentd's process `pid` logs a line that `match` accepts. */
export async function waitLogged(
  node: RealNode,
  pid: number,
  what: string,
  match: (line: Record<string, unknown>) => boolean,
  timeoutMs = 180_000,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const hit = (await logLines(node, pid)).find(match);
    if (hit) return hit;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${await node.journal(200)}`);
    await delay(200);
  }
}

/** The record of `id` as written in the state dir, or null. */
export async function recordOnDisk(node: RealNode, id: string): Promise<OperationJson | null> {
  const res = await node.host.exec(['cat', `${STATE_DIR}/operations/${id}.json`]);
  return res.exitCode === 0 ? (JSON.parse(res.stdout) as OperationJson) : null;
}

/**
 * After a cell, once the fault is gone: agentd answers, owes nothing, and has written the
 * operation's end on disk as it reports it, with no phase still running; the journal is closed
 * and the space reserve whole. Returns the operation.
 */
export async function expectCaughtUp(
  node: RealNode,
  id: string,
  timeoutMs = 120_000,
): Promise<OperationJson> {
  await node.waitReady(timeoutMs);
  const deadline = Date.now() + timeoutMs;
  let status = await node.agentctlJson<StatusJson>(['status']);
  for (;;) {
    const disk = await recordOnDisk(node, id);
    if (status.node.warnings.length === 0 && disk !== null && disk.state !== 'running') break;
    expect(Date.now(), `owed writes: ${JSON.stringify(status.node.warnings)}`).toBeLessThan(deadline);
    await delay(200);
    status = await node.agentctlJson<StatusJson>(['status']);
  }
  const op = await node.agentctlJson<OperationJson>(['ops', 'get', id]);
  expect(op.phases.filter((p) => p.state === 'running' || p.state === 'pending')).toEqual([]);
  expect((await recordOnDisk(node, id))?.state).toBe(op.state);
  const journal = JSON.parse((await node.host.execOk(['cat', `${STATE_DIR}/journal.json`])).stdout) as {
    operationId: string;
    closed: boolean;
  };
  expect(journal).toMatchObject({ operationId: id, closed: true });
  const reserve = await node.host.execOk(['stat', '-c', '%s', `${STATE_DIR}/space-reserve`]);
  expect(Number(reserve.stdout.trim())).toBe(1024 * 1024);
  return op;
}
