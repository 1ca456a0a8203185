/**
 * Every call agentctl makes to the daemon is bounded (docs/cli.md, --timeout): 90 s by default,
 * 5 s for the status check of stop, uninstall and version, --timeout when given, and a raw call
 * that waits on the daemon's side (timeoutSeconds) gets that long on top. What each transport is
 * created with is recorded, so no test waits for a timeout to fire.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type * as HttpTransport from '../../../src/rpc/http-transport.js';

const created = vi.hoisted(() => [] as { socketPath: string; timeoutMs?: number }[]);
vi.mock('../../../src/rpc/http-transport.js', async (importOriginal) => {
  const real = await importOriginal<typeof HttpTransport>();
  return {
    ...real,
    createHttpTransport: (options: { socketPath: string; timeoutMs?: number }) => {
      created.push({ socketPath: options.socketPath, timeoutMs: options.timeoutMs });
      return real.createHttpTransport(options);
    },
    // What `metrics` calls directly (the transport above calls its own, unrecorded).
    requestOverSocket: (options: Parameters<typeof real.requestOverSocket>[0]) => {
      created.push({ socketPath: options.socketPath, timeoutMs: options.timeoutMs });
      return real.requestOverSocket(options);
    },
  };
});

const { runCli } = await import('../../../src/cli/main.js');
const { DEFAULT_CALL_TIMEOUT_MS, STATUS_CHECK_TIMEOUT_MS } = await import('../../../src/cli/context.js');
const { systemClock } = await import('../../../src/host/clock.js');
const { recordingStream } = await import('../../support/cli.js');

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-timeouts-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Run agentctl against a socket nobody listens on; returns the timeouts its transports got. */
async function timeoutsOf(...args: string[]): Promise<(number | undefined)[]> {
  created.length = 0;
  const proc = { stdin: new PassThrough(), clock: systemClock, onInterrupt: () => () => undefined };
  await runCli(['node', 'agentctl', '--socket', path.join(dir, 'none.sock'), ...args], {
    env: {},
    cwd: dir,
    stdout: recordingStream(),
    stderr: recordingStream(),
    proc,
  });
  return created.map((c) => c.timeoutMs);
}

describe('the timeout of a daemon call', () => {
  it('is 90 s by default, the value docs/cli.md gives', async () => {
    expect(DEFAULT_CALL_TIMEOUT_MS).toBe(90_000);
    expect(await timeoutsOf('status')).toEqual([90_000]);
    expect(await timeoutsOf('ops', 'list')).toEqual([90_000]);
    expect(await timeoutsOf('metrics')).toEqual([90_000]);
  });

  it('is --timeout when given', async () => {
    expect(await timeoutsOf('--timeout', '2m', 'status')).toEqual([120_000]);
    expect(await timeoutsOf('status', '--timeout', '3s')).toEqual([3_000]);
  });

  it('is 5 s for the status check of stop, uninstall and version (--timeout when given)', async () => {
    expect(STATUS_CHECK_TIMEOUT_MS).toBe(5_000);
    const pidFile = path.join(dir, 'none.pid');
    expect(await timeoutsOf('stop', '--pid-file', pidFile)).toEqual([5_000]);
    expect(await timeoutsOf('version')).toEqual([5_000]);
    expect(
      await timeoutsOf('uninstall', '--yes', '--root', path.join(dir, 'root'), '--pid-file', pidFile),
    ).toEqual([5_000]);
    expect(await timeoutsOf('--timeout', '20s', 'version')).toEqual([20_000]);
  });

  it('rpc: timeoutSeconds in the params adds to the default, not to --timeout', async () => {
    expect(await timeoutsOf('rpc', 'operations.wait', '{"id":"op-1","timeoutSeconds":300}')).toEqual([
      390_000,
    ]);
    expect(
      await timeoutsOf('--timeout', '10s', 'rpc', 'operations.wait', '{"id":"op-1","timeoutSeconds":300}'),
    ).toEqual([10_000]);
    expect(await timeoutsOf('rpc', 'status')).toEqual([90_000]);
  });
});
