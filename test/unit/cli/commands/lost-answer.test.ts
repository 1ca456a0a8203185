/**
 * `agentctl ops cancel` and `rpc` of a mutating method (`fleet.resume` among them) when the
 * answer is lost (src/cli/lost-answer.ts; the commands that start an operation:
 * start-operation.test.ts; `fleet pause|resume` act with the operator's kubeconfig, not through
 * agentd: fleet-operator.test.ts): the change may have been made all the same, and agentctl says so,
 * with how to see whether it was. A read whose answer is lost changed nothing: the usual error.
 * agentctl runs in this process against a unix socket that takes the request and never answers,
 * closes the connection once the request has arrived, or answers with something that cannot be
 * read.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runInProcess, unansweringDaemon } from '../../../support/unanswering-daemon.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-lost-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Each call that changes something, what agentctl calls its request, its effect and the check. */
const CHANGES = [
  {
    args: ['ops', 'cancel', 'op-1'],
    method: 'operations.cancel',
    request: 'the request to cancel op-1',
    effect: 'the cancel of op-1 may have taken effect',
    check: (s: string) => `see whether it did with: agentctl --socket ${s} ops get op-1`,
  },
  // `rpc` names a mutating call as the command that makes it does.
  {
    args: ['rpc', 'operations.cancel', '{"id":"op-1"}'],
    method: 'operations.cancel',
    request: 'the request to cancel op-1',
    effect: 'the cancel of op-1 may have taken effect',
    check: (s: string) => `see whether it did with: agentctl --socket ${s} ops get op-1`,
  },
  {
    args: ['rpc', 'fleet.resume'],
    method: 'fleet.resume',
    request: 'the fleet resume request',
    effect: 'the resume may have taken effect',
    check: (s: string) => `see whether it did with: agentctl --socket ${s} fleet status`,
  },
  {
    args: ['rpc', 'uncordon', '{"wait":false}'],
    method: 'uncordon',
    request: 'the uncordon request',
    effect: 'the uncordon may have started on the daemon',
    check: (s: string) =>
      `see it with: agentctl --socket ${s} ops list, then follow it with: agentctl --socket ${s} ops wait <id>`,
  },
  // A method this agentctl does not know (a newer agentd's) may change something too.
  {
    args: ['rpc', 'nodes.reboot'],
    method: 'nodes.reboot',
    request: 'the nodes.reboot request',
    effect: 'the nodes.reboot call may have changed something on the daemon',
    check: (s: string) => `see what it did before calling it again: agentctl --socket ${s} status`,
  },
];

/** Calls that change nothing: reads, and a dry run. */
const READS = [
  ['ops', 'get', 'op-1'],
  ['fleet', 'status'],
  ['rpc', 'fleet.status'],
  ['rpc', 'update', '{"set":{"image":"r/i:2"},"dryRun":true}'],
];

describe('agentd closes the connection after the request went out, before answering', () => {
  it.each(CHANGES)('$args: the change may have been made; exit 3', async (c) => {
    const d = await unansweringDaemon(dir, { closeOnRequest: true });
    try {
      const r = await runInProcess(['--socket', d.socket, ...c.args], dir).done;
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(
        `agentctl: agentd on ${d.socket} closed the connection without answering ${c.request}; ${c.effect} all the same: once agentd answers again, ${c.check(d.socket)}`,
      );
      expect(r.stderr).not.toContain('is agentd running?');
      expect(d.seen(c.method)).toBe(true);

      const json = await runInProcess(['--socket', d.socket, '--json', ...c.args], dir).done;
      expect(json.code).toBe(3);
      expect(JSON.parse(json.stdout)).toMatchObject({
        error: { code: 'UNREACHABLE', exitCode: 3, reason: 'closed', mayHaveStarted: true, socket: d.socket },
      });
    } finally {
      await d.close();
    }
  });

  it.each(READS)('%s …: a read, the usual unreachable error', async (...args) => {
    const d = await unansweringDaemon(dir, { closeOnRequest: true });
    try {
      const r = await runInProcess(['--socket', d.socket, '--json', ...args], dir).done;
      expect(r.code).toBe(3);
      const { error } = JSON.parse(r.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ code: 'UNREACHABLE', reason: 'closed' });
      expect(error).not.toHaveProperty('mayHaveStarted');
      expect(r.stderr).toContain(
        `cannot reach agentd on ${d.socket}: the daemon closed the connection without answering`,
      );
    } finally {
      await d.close();
    }
  });
});

describe('--timeout passes before agentd answers', () => {
  it.each(CHANGES)('$args: the change may have been made; exit 5', async (c) => {
    const d = await unansweringDaemon(dir);
    try {
      const r = await runInProcess(['--socket', d.socket, '--json', '--timeout', '200ms', ...c.args], dir)
        .done;
      expect(r.code).toBe(5);
      expect(r.stderr).toContain(
        `agentctl: agentd on ${d.socket} did not answer ${c.request} within --timeout (200ms); ${c.effect} all the same: ${c.check(d.socket)}`,
      );
      expect(JSON.parse(r.stdout)).toMatchObject({
        error: { code: 'TIMEOUT', exitCode: 5, mayHaveStarted: true, socket: d.socket },
      });
    } finally {
      await d.close();
    }
  });

  it.each(READS)('%s …: a read, the usual timeout', async (...args) => {
    const d = await unansweringDaemon(dir);
    try {
      const r = await runInProcess(['--socket', d.socket, '--json', '--timeout', '200ms', ...args], dir).done;
      expect(r.code).toBe(5);
      const { error } = JSON.parse(r.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ code: 'TIMEOUT' });
      expect(error).not.toHaveProperty('mayHaveStarted');
      expect(r.stderr).toContain('did not answer in time');
    } finally {
      await d.close();
    }
  });
});

describe('agentd answers with something that cannot be read', () => {
  // Cut short: the head promises a body longer than what came before the connection closed.
  const cut =
    'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 80\r\n\r\n{"jsonrpc":"2.0"';
  const says = "the daemon's HTTP answer was cut: 16 of 80 bytes of body";

  it.each(CHANGES)('$args: agentd had the request, so the change may have been made; exit 1', async (c) => {
    const d = await unansweringDaemon(dir, { badAnswer: cut });
    try {
      const r = await runInProcess(['--socket', d.socket, ...c.args], dir).done;
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        `agentctl: cannot read the answer to ${c.request} on ${d.socket}: ${says}; ${c.effect} all the same: ${c.check(d.socket)}; agentd's log may say more (journalctl -u agentd)`,
      );

      const json = await runInProcess(['--socket', d.socket, '--json', ...c.args], dir).done;
      expect(json.code).toBe(1);
      expect(JSON.parse(json.stdout)).toMatchObject({
        error: { code: 'BAD_ANSWER', exitCode: 1, mayHaveStarted: true, socket: d.socket },
      });
    } finally {
      await d.close();
    }
  });

  it.each(READS)('%s …: a read, the usual BAD_ANSWER', async (...args) => {
    const d = await unansweringDaemon(dir, { badAnswer: cut });
    try {
      const r = await runInProcess(['--socket', d.socket, '--json', ...args], dir).done;
      expect(r.code).toBe(1);
      const { error } = JSON.parse(r.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ code: 'BAD_ANSWER', socket: d.socket });
      expect(error).not.toHaveProperty('mayHaveStarted');
      expect(r.stderr).toContain(`${says} (socket ${d.socket}): is agentd what listens there?`);
    } finally {
      await d.close();
    }
  });
});

describe('the limit a timeout names', () => {
  it('is the one that passed, also without --timeout (its default, or a longer one for a call that waits)', async () => {
    const { lostAnswerError } = await import('../../../../src/cli/lost-answer.js');
    const { DaemonUnreachableError } = await import('../../../../src/rpc/http-transport.js');
    const ctx = { options: { socket: '/run/agentd/agentd.sock' } } as Parameters<typeof lostAnswerError>[0];
    const change = { request: 'the update request', effect: 'the update may have started', check: 'see it' };
    const timedOut = (ms: number) =>
      new DaemonUnreachableError('/run/agentd/agentd.sock', 'timeout', `no answer within ${ms} ms`, true, ms);
    expect(lostAnswerError(ctx, change, timedOut(90_000))?.message).toContain(
      'did not answer the update request within --timeout (90s)',
    );
    expect(lostAnswerError(ctx, change, timedOut(95_000))?.message).toContain('within --timeout (95s)');
  });
});
