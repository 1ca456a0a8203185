import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { UPSTREAM_DAEMON_UNIT, createUpstreamDaemonGuard } from '../../../src/host/upstream-daemon.js';
import {
  SIM_UPSTREAM_DAEMON_ACTIVE,
  SIM_UPSTREAM_DAEMON_WANTS,
} from '../../../src/sim/host/host-commands.js';
import { createSimHost } from '../../../src/sim/host/sim-host.js';
import type { CommandRunner } from '../../../src/host/types.js';
import { createFakeClock } from './fake-clock.js';

function capture(): { logger: pino.Logger; lines: () => Array<Record<string, unknown>> } {
  const out: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out.push(chunk.toString('utf8'));
      cb();
    },
  });
  return {
    logger: pino({ level: 'info' }, stream),
    lines: () =>
      out
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/** The simulated host with an installed upstream daemon, enabled and running. */
async function installUpstream(root: string, { enabled = true, active = true } = {}): Promise<void> {
  const unitDir = path.join(root, 'etc/systemd/system');
  await mkdir(path.join(unitDir, 'multi-user.target.wants'), { recursive: true });
  await writeFile(
    path.join(unitDir, UPSTREAM_DAEMON_UNIT),
    '[Service]\nExecStart=/usr/local/bin/unbounded-agent daemon\n',
  );
  if (enabled) await symlink(`../${UPSTREAM_DAEMON_UNIT}`, path.join(root, SIM_UPSTREAM_DAEMON_WANTS));
  if (active) {
    await mkdir(path.dirname(path.join(root, SIM_UPSTREAM_DAEMON_ACTIVE)), { recursive: true });
    await writeFile(path.join(root, SIM_UPSTREAM_DAEMON_ACTIVE), '');
  }
}

describe('taking over from the upstream daemon', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'agentd-upstream-daemon-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('stops and disables an enabled, running daemon, says so once in the log and in status', async () => {
    await installUpstream(root);
    const host = createSimHost({ root });
    const { logger, lines } = capture();
    const guard = createUpstreamDaemonGuard({ runner: host, clock: createFakeClock(0), logger });
    expect(await guard.takeOver()).toEqual({
      at: '1970-01-01T00:00:00.000Z',
      wasEnabled: true,
      wasActive: true,
    });
    // Taken over: the next look finds nothing to do and logs nothing more.
    expect(await guard.takeOver()).toBeNull();
    expect(lines().filter((l) => String(l.msg).includes('upstream agent'))).toHaveLength(1);
    expect(guard.warnings()).toEqual([
      `agentd stopped and disabled the upstream agent's daemon ${UPSTREAM_DAEMON_UNIT} (it was enabled and running) at 1970-01-01T00:00:00.000Z`,
    ]);
    expect(
      (await host.run('systemctl', ['is-enabled', UPSTREAM_DAEMON_UNIT], { reject: false })).stdout,
    ).toBe('disabled\n');
    expect((await host.run('systemctl', ['is-active', UPSTREAM_DAEMON_UNIT], { reject: false })).stdout).toBe(
      'inactive\n',
    );
  });

  it('stops a daemon that runs while disabled, and disables one that is enabled but stopped', async () => {
    await installUpstream(root, { enabled: false, active: true });
    const guard = createUpstreamDaemonGuard({
      runner: createSimHost({ root }),
      clock: createFakeClock(),
      logger: pino({ level: 'silent' }),
    });
    expect(await guard.takeOver()).toMatchObject({ wasEnabled: false, wasActive: true });
    await rm(root, { recursive: true, force: true });
    await installUpstream(root, { enabled: true, active: false });
    expect(await guard.takeOver()).toMatchObject({ wasEnabled: true, wasActive: false });
  });

  it('runs only the two questions on a host without the upstream daemon', async () => {
    const calls: string[] = [];
    const sim = createSimHost({ root });
    const runner: CommandRunner = {
      run: (file, args, o) => {
        calls.push([file, ...args].join(' '));
        return sim.run(file, args, o);
      },
    };
    const guard = createUpstreamDaemonGuard({
      runner,
      clock: createFakeClock(),
      logger: pino({ level: 'silent' }),
    });
    expect(await guard.takeOver()).toBeNull();
    expect(calls).toEqual([
      `systemctl is-enabled ${UPSTREAM_DAEMON_UNIT}`,
      `systemctl is-active ${UPSTREAM_DAEMON_UNIT}`,
    ]);
    expect(guard.warnings()).toEqual([]);
  });

  it('fails naming the command to run when the daemon cannot be stopped, and status says so', async () => {
    const runner: CommandRunner = {
      run: async (file, args) => {
        if (args[0] === 'disable') throw new Error('Access denied');
        return {
          command: '',
          exitCode: 0,
          stdout: args[0] === 'is-enabled' ? 'enabled\n' : 'active\n',
          stderr: '',
          durationMs: 0,
        };
      },
    };
    const guard = createUpstreamDaemonGuard({
      runner,
      clock: createFakeClock(),
      logger: pino({ level: 'silent' }),
    });
    await expect(guard.takeOver()).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
      message: expect.stringContaining(`run: systemctl disable --now ${UPSTREAM_DAEMON_UNIT}`),
    });
    expect(guard.warnings()[0]).toContain('could not be stopped (Access denied)');
  });

  it('a check that cannot run (descriptors exhausted) refuses the update and claims nothing in status', async () => {
    const { logger } = capture();
    const runner: CommandRunner = {
      run: () => Promise.reject(Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' })),
    } as unknown as CommandRunner;
    const guard = createUpstreamDaemonGuard({ runner, clock: createFakeClock(), logger });
    await expect(guard.takeOver()).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
      message: expect.stringContaining('cannot tell whether'),
    });
    expect(guard.warnings()).toEqual([]);
  });
});
