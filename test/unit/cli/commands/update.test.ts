/**
 * `agentctl update` while agentd has not answered its request (src/cli/commands/update.ts): the
 * request is in flight, there is no operation id yet, and the update may have started. agentctl
 * runs in this process against a unix socket that takes the request and never answers. The same
 * for reset, drain and uncordon: start-operation.test.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  runInProcess,
  unansweringDaemon,
  type UnansweringDaemon,
} from '../../../support/unanswering-daemon.js';

let dir: string;
let daemon: UnansweringDaemon;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-update-'));
  daemon = await unansweringDaemon(dir);
});
afterEach(async () => {
  await daemon.close();
  await rm(dir, { recursive: true, force: true });
});

/** Run agentctl; `interrupts` receives its Ctrl-C handler (the last one it installed). */
function agentctl(args: string[], interrupts: { fire?: () => void } = {}) {
  return runInProcess(['--socket', daemon.socket, ...args], dir, interrupts);
}

describe('agentctl update --timeout, when agentd does not answer the request in time', () => {
  it('says the update may have started and how to find it; exit 5', async () => {
    const r = await agentctl(['--timeout', '200ms', 'update', '--image', 'r/i:2']).done;
    expect(r.code).toBe(5);
    expect(r.stderr).toContain(
      `agentd on ${daemon.socket} did not answer the update request within --timeout (200ms); the update may have started on the daemon all the same`,
    );
    expect(r.stderr).toContain(`see it with: agentctl --socket ${daemon.socket} ops list`);
    expect(r.stderr).toContain(`follow it with: agentctl --socket ${daemon.socket} ops wait <id>`);
  });

  it('--json: mayHaveStarted: true in the error', async () => {
    const r = await agentctl(['update', '--image', 'r/i:2', '--timeout', '200ms', '--json']).done;
    expect(r.code).toBe(5);
    expect(JSON.parse(r.stdout)).toMatchObject({
      error: { code: 'TIMEOUT', exitCode: 5, mayHaveStarted: true, socket: daemon.socket },
    });
  });

  it('a dry run starts nothing: the usual timeout error', async () => {
    const r = await agentctl(['--json', '--timeout', '200ms', 'update', '--dry-run']).done;
    expect(r.code).toBe(5);
    const { error } = JSON.parse(r.stdout) as { error: Record<string, unknown> };
    expect(error).toMatchObject({ code: 'TIMEOUT' });
    expect(error).not.toHaveProperty('mayHaveStarted');
  });
});

describe('Ctrl-C before agentd answered the update request', () => {
  it('says at once that it waits for the answer; a second Ctrl-C stops waiting: exit 130', async () => {
    const ctrlC: { fire?: () => void } = {};
    const run = agentctl(['update', '--image', 'r/i:2'], ctrlC);
    await daemon.received('update');
    ctrlC.fire?.();
    // Said at once, with no answer from agentd.
    expect(run.stderr()).toContain(
      'interrupted: agentd has not answered the update request yet; waiting for its answer to cancel the update it may have started (Ctrl-C again to stop waiting',
    );
    ctrlC.fire?.();
    const r = await run.done;
    expect(r.code).toBe(130);
    expect(r.stderr).toContain(
      'agentctl: interrupted before agentd answered the update request; the update may have started on the daemon and go on: see it with: agentctl --socket',
    );
    expect(r.stdout).toBe('');
  });

  it('--json: one JSON value, mayHaveStarted: true', async () => {
    const ctrlC: { fire?: () => void } = {};
    const run = agentctl(['--json', 'update', '--image', 'r/i:2'], ctrlC);
    await daemon.received('update');
    ctrlC.fire?.();
    ctrlC.fire?.();
    const r = await run.done;
    expect(r.code).toBe(130);
    expect(JSON.parse(r.stdout)).toMatchObject({
      error: { code: 'INTERRUPTED', exitCode: 130, mayHaveStarted: true },
    });
  });

  it('a dry run changes nothing: the first Ctrl-C ends it', async () => {
    const ctrlC: { fire?: () => void } = {};
    const run = agentctl(['update', '--dry-run'], ctrlC);
    await daemon.received('update');
    ctrlC.fire?.();
    const r = await run.done;
    expect(r.code).toBe(130);
    expect(r.stderr).toContain('interrupted; a dry run changes nothing');
  });
});
