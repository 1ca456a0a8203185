/**
 * `agentctl reset`, `drain` and `uncordon` while agentd has not answered the request that starts
 * the operation (src/cli/follow/start-operation.ts, shared with `update`: update.test.ts): there
 * is no operation id yet, and the operation may have started. agentctl runs in this process
 * against a unix socket that takes the request and never answers, closes the connection once
 * the request has arrived (a daemon stopping or dying as the request came in), or answers with
 * something that cannot be read (a daemon dying while answering).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createCliContext } from '../../../../src/cli/context.js';
import { CliError } from '../../../../src/cli/exit-codes.js';
import { startOperation } from '../../../../src/cli/follow/start-operation.js';
import { createOutput } from '../../../../src/cli/output.js';
import { DaemonUnreachableError } from '../../../../src/rpc/http-transport.js';
import { recordingStream } from '../../../support/cli.js';
import {
  runInProcess,
  unansweringDaemon,
  type UnansweringDaemon,
} from '../../../support/unanswering-daemon.js';

let dir: string;
let daemon: UnansweringDaemon;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-start-'));
  daemon = await unansweringDaemon(dir);
});
afterEach(async () => {
  await daemon.close();
  await rm(dir, { recursive: true, force: true });
});

function agentctl(
  args: string[],
  interrupts: { fire?: () => void; onInstalled?: (f: () => void) => void } = {},
) {
  return runInProcess(['--socket', daemon.socket, ...args], dir, interrupts);
}

/** Each command, its arguments, and whether agentd can cancel what it starts (docs/api.md). */
const COMMANDS = [
  { kind: 'reset', args: ['reset', '--yes'], cancellable: false },
  { kind: 'drain', args: ['drain', '--ignore-daemonsets'], cancellable: true },
  { kind: 'uncordon', args: ['uncordon'], cancellable: false },
] as const;

describe.each(COMMANDS)('Ctrl-C before agentd answered the $kind request', ({ kind, args, cancellable }) => {
  it('says at once that it waits for the answer; a second Ctrl-C stops waiting: exit 130', async () => {
    const ctrlC: { fire?: () => void } = {};
    const run = agentctl([...args], ctrlC);
    await daemon.received(kind);
    ctrlC.fire?.();
    // Said at once, with no answer from agentd.
    expect(run.stderr()).toContain(
      cancellable
        ? `interrupted: agentd has not answered the ${kind} request yet; waiting for its answer to cancel the ${kind} it may have started (Ctrl-C again to stop waiting`
        : `interrupted: agentd has not answered the ${kind} request yet; waiting for its answer to name the ${kind} it may have started, which cannot be cancelled (Ctrl-C again to stop waiting)`,
    );
    ctrlC.fire?.();
    const r = await run.done;
    expect(r.code).toBe(130);
    expect(r.stderr).toContain(
      `agentctl: interrupted before agentd answered the ${kind} request; the ${kind} may have started on the daemon and go on: see it with: agentctl --socket ${daemon.socket} ops list, then follow it with: agentctl --socket ${daemon.socket} ops wait <id>`,
    );
    // Only what agentd can do is offered.
    expect(r.stderr.includes('ops cancel <id>')).toBe(cancellable);
    expect(r.stdout).toBe('');
  });

  it('--json: one JSON value, mayHaveStarted: true', async () => {
    const ctrlC: { fire?: () => void } = {};
    const run = agentctl(['--json', ...args], ctrlC);
    await daemon.received(kind);
    ctrlC.fire?.();
    ctrlC.fire?.();
    const r = await run.done;
    expect(r.code).toBe(130);
    expect(JSON.parse(r.stdout)).toMatchObject({
      error: { code: 'INTERRUPTED', exitCode: 130, mayHaveStarted: true },
    });
  });

  it('Ctrl-C before the request is sent: nothing is requested', async () => {
    // The Ctrl-C arrives as soon as agentctl takes it over, before the request goes out.
    const r = await agentctl([...args], { onInstalled: (fire) => fire() }).done;
    expect(r.code).toBe(130);
    expect(r.stderr).toContain(`interrupted before the ${kind} was requested; nothing was started`);
    expect(daemon.seen(kind)).toBe(false);
  });

  it('--timeout before the answer: the operation may have started; exit 5', async () => {
    const r = await agentctl(['--json', '--timeout', '200ms', ...args]).done;
    expect(r.code).toBe(5);
    expect(r.stderr).toContain(
      `agentd on ${daemon.socket} did not answer the ${kind} request within --timeout (200ms); the ${kind} may have started on the daemon all the same: see it with: agentctl --socket ${daemon.socket} ops list`,
    );
    expect(JSON.parse(r.stdout)).toMatchObject({
      error: { code: 'TIMEOUT', exitCode: 5, mayHaveStarted: true, socket: daemon.socket },
    });
  });
});

describe('agentctl drain --dry-run before agentd answered', () => {
  it('changes nothing: the first Ctrl-C ends it', async () => {
    const ctrlC: { fire?: () => void } = {};
    const run = agentctl(['drain', '--dry-run'], ctrlC);
    await daemon.received('drain');
    ctrlC.fire?.();
    const r = await run.done;
    expect(r.code).toBe(130);
    expect(r.stderr).toContain('interrupted; a dry run changes nothing');
  });

  it('--timeout: the usual timeout error, nothing may have started', async () => {
    const r = await agentctl(['--json', '--timeout', '200ms', 'drain', '--dry-run']).done;
    expect(r.code).toBe(5);
    const { error } = JSON.parse(r.stdout) as { error: Record<string, unknown> };
    expect(error).toMatchObject({ code: 'TIMEOUT' });
    expect(error).not.toHaveProperty('mayHaveStarted');
  });
});

describe('agentd closes the connection after the request went out, before answering', () => {
  let closing: UnansweringDaemon;
  beforeEach(async () => {
    closing = await unansweringDaemon(dir, { closeOnRequest: true });
  });
  afterEach(async () => {
    await closing.close();
  });
  const run = (args: string[]) => runInProcess(['--socket', closing.socket, ...args], dir).done;

  it.each([{ kind: 'update', args: ['update', '--image', 'r/i:2'], cancellable: true }, ...COMMANDS])(
    '$kind: the operation may have started, and how to find it; exit 3',
    async ({ kind, args, cancellable }) => {
      const r = await run([...args]);
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(
        `agentctl: agentd on ${closing.socket} closed the connection without answering the ${kind} request; the ${kind} may have started on the daemon all the same: once agentd answers again, see it with: agentctl --socket ${closing.socket} ops list, then follow it with: agentctl --socket ${closing.socket} ops wait <id>`,
      );
      expect(r.stderr.includes('ops cancel <id>')).toBe(cancellable);
      expect(r.stderr).not.toContain('is agentd running?');

      const json = await run(['--json', ...args]);
      expect(json.code).toBe(3);
      expect(JSON.parse(json.stdout)).toMatchObject({
        error: {
          code: 'UNREACHABLE',
          exitCode: 3,
          reason: 'closed',
          mayHaveStarted: true,
          socket: closing.socket,
        },
      });
    },
  );

  it.each([{ args: ['update', '--dry-run'] }, { args: ['drain', '--dry-run'] }, { args: ['status'] }])(
    '$args starts nothing: the usual unreachable error, without mayHaveStarted',
    async ({ args }) => {
      const r = await run(['--json', ...args]);
      expect(r.code).toBe(3);
      const { error } = JSON.parse(r.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ code: 'UNREACHABLE', reason: 'closed' });
      expect(error).not.toHaveProperty('mayHaveStarted');
      expect(r.stderr).toContain(
        `cannot reach agentd on ${closing.socket}: the daemon closed the connection without answering`,
      );
    },
  );
});

/** Answers that cannot be read, each with what agentctl says of it (src/rpc/http-transport.ts). */
const BAD_ANSWERS = [
  {
    name: 'cut short',
    answer:
      'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 80\r\n\r\n{"jsonrpc":"2.0","id":1,"res',
    says: "the daemon's HTTP answer was cut: 28 of 80 bytes of body",
  },
  {
    name: 'not JSON',
    answer: 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n\r\nhello',
    says: 'the daemon answered HTTP 200 with a body that is not JSON',
  },
];

describe.each(BAD_ANSWERS)(
  'agentd answers the request with something that cannot be read ($name)',
  ({ answer, says }) => {
    let garbled: UnansweringDaemon;
    beforeEach(async () => {
      garbled = await unansweringDaemon(dir, { badAnswer: answer });
    });
    afterEach(async () => {
      await garbled.close();
    });
    const run = (args: string[]) => runInProcess(['--socket', garbled.socket, ...args], dir).done;

    it.each([{ kind: 'update', args: ['update', '--image', 'r/i:2'], cancellable: true }, ...COMMANDS])(
      '$kind: agentd had the request, so the operation may have started; exit 1',
      async ({ kind, args, cancellable }) => {
        const r = await run([...args]);
        expect(r.code).toBe(1);
        expect(r.stderr).toContain(
          `agentctl: cannot read the answer to the ${kind} request on ${garbled.socket}: ${says}; the ${kind} may have started on the daemon all the same: see it with: agentctl --socket ${garbled.socket} ops list, then follow it with: agentctl --socket ${garbled.socket} ops wait <id>`,
        );
        expect(r.stderr.includes('ops cancel <id>')).toBe(cancellable);

        const json = await run(['--json', ...args]);
        expect(json.code).toBe(1);
        expect(JSON.parse(json.stdout)).toMatchObject({
          error: { code: 'BAD_ANSWER', exitCode: 1, mayHaveStarted: true, socket: garbled.socket },
        });
      },
    );

    it.each([{ args: ['update', '--dry-run'] }, { args: ['drain', '--dry-run'] }, { args: ['status'] }])(
      '$args starts nothing: the usual BAD_ANSWER, without mayHaveStarted',
      async ({ args }) => {
        const r = await run(['--json', ...args]);
        expect(r.code).toBe(1);
        const { error } = JSON.parse(r.stdout) as { error: Record<string, unknown> };
        expect(error).toMatchObject({ code: 'BAD_ANSWER', socket: garbled.socket });
        expect(error).not.toHaveProperty('mayHaveStarted');
        expect(r.stderr).toContain(`${says} (socket ${garbled.socket}): is agentd what listens there?`);
      },
    );
  },
);

describe('no daemon on the socket: nothing was sent', () => {
  it.each([{ args: ['update', '--image', 'r/i:2'] }, ...COMMANDS])(
    '$args: unreachable, exit 3, without mayHaveStarted',
    async ({ args }) => {
      const none = path.join(dir, 'none.sock');
      const r = await runInProcess(['--socket', none, '--json', ...args], dir).done;
      expect(r.code).toBe(3);
      const { error } = JSON.parse(r.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ code: 'UNREACHABLE', exitCode: 3, reason: 'missing', socket: none });
      expect(error).not.toHaveProperty('mayHaveStarted');
      expect(r.stderr).toContain(`cannot reach agentd on ${none}`);
      expect(r.stderr).not.toContain('may have started');
    },
  );
});

describe('a connection that breaks after the request went out', () => {
  it('names the error, and says the operation may have started', async () => {
    const sink = recordingStream();
    const out = createOutput({ json: false, colorFlag: false, env: {}, stdout: sink, stderr: sink });
    const ctx = {
      ...createCliContext(
        { socket: '/x.sock', json: false, timeoutMs: undefined, color: false },
        out,
        {},
        dir,
      ),
      callUntyped: () =>
        Promise.reject(new DaemonUnreachableError('/x.sock', 'closed', 'read ECONNRESET', true)),
    };
    const interrupt = {
      signal: new AbortController().signal,
      pressed: () => new Promise<void>(() => undefined),
      dispose: () => undefined,
    };
    const err = await startOperation(ctx, { kind: 'reset', params: {} }, interrupt).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect(err).toMatchObject({
      exitCode: 3,
      message: expect.stringContaining(
        'agentd on /x.sock closed the connection without answering the reset request (read ECONNRESET); the reset may have started on the daemon all the same',
      ),
      details: { code: 'UNREACHABLE', reason: 'closed', mayHaveStarted: true },
    });
  });
});
