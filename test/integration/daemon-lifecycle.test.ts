/**
 * The lifecycle that cannot leak: a signal during startup recovery stops the daemon cleanly
 * (exit 0, no PID file, no socket), of two daemons started at the same instant on the same
 * PID file and socket exactly one runs, and a start that fails takes down what it had started.
 * Needs `npm run build`.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { chmod, mkdir, realpath, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadDaemonConfig } from '../../src/config/load-config.js';
import { startDaemon } from '../../src/daemon/daemon.js';
import {
  AGENTD_BIN,
  childEnv,
  makeTempDir,
  requestUnix,
  runAgentd,
  startTestDaemon,
  waitUntil,
} from '../support/daemon.js';

interface Run {
  pid: number;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill: (signal: NodeJS.Signals) => void;
}

function spawnAgentd(dir: string, env: Record<string, string> = {}): Run {
  // An empty config file of the test's own: /etc/agentd/config.yaml is never read, and the
  // test does not depend on /dev/null being a device.
  const config = path.join(dir, 'agentd-config.yaml');
  writeFileSync(config, '');
  const proc = spawn(
    process.execPath,
    [
      AGENTD_BIN,
      '--config',
      config,
      '--socket',
      path.join(dir, 'agentd.sock'),
      '--pid-file',
      path.join(dir, 'agentd.pid'),
      '--state-dir',
      path.join(dir, 'state'),
      '--root',
      path.join(dir, 'root'),
      '--host',
      'sim',
      '--log-format',
      'json',
    ],
    { cwd: dir, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  proc.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
  proc.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal })),
  );
  onTestFinished(async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await exited;
  });
  return { pid: proc.pid as number, output: () => output, exited, kill: (s) => proc.kill(s) };
}

const gone = async (file: string): Promise<boolean> =>
  stat(file).then(
    () => false,
    () => true,
  );

/**
 * A node dir whose journal holds an update interrupted before its commit: recovery removes the
 * target and restarts the source. Run it with every host command slowed down (latency), so a
 * signal lands while recovery runs.
 */
async function nodeToRecover(): Promise<string> {
  const dir = await makeTempDir();
  await mkdir(path.join(dir, 'root'), { recursive: true });
  await mkdir(path.join(dir, 'state'), { recursive: true });
  await writeFile(
    path.join(dir, 'state', 'journal.json'),
    JSON.stringify({
      version: 1,
      operationId: 'op-1',
      kind: 'update',
      source: 'kube1',
      target: 'kube2',
      phase: 'provision',
      phaseState: 'running',
      committed: false,
      sourceStopped: false,
      cordonedByUs: false,
      targetHash: null,
      closed: false,
      outcome: null,
      updatedAt: '2026-01-01T00:00:00.000Z',
    }),
  );
  return dir;
}

describe('daemon lifecycle', () => {
  it('SIGTERM during startup recovery: recovery ends, then a clean stop — exit 0, no PID file, no socket', async () => {
    const dir = await nodeToRecover();
    const run = spawnAgentd(dir, { AGENTD_SIM_FAULTS: 'latency=300:*' });
    await waitUntil('the daemon serving, recovering', () => run.output().includes('agentd serving'));
    expect(run.output()).not.toContain('agentd ready');
    run.kill('SIGTERM');
    const { code, signal } = await run.exited;
    expect({ code, signal }, run.output()).toEqual({ code: 0, signal: null });
    expect(await gone(path.join(dir, 'agentd.pid'))).toBe(true);
    expect(await gone(path.join(dir, 'agentd.sock'))).toBe(true);
    expect(run.output()).toContain('stop requested while starting');
    expect(run.output()).toContain('agentd stopped');
  });

  it('SIGHUP and SIGUSR2 during startup recovery are logged and ignored: recovery ends, agentd serves, SIGTERM stops it cleanly', async () => {
    const dir = await nodeToRecover();
    const run = spawnAgentd(dir, { AGENTD_SIM_FAULTS: 'latency=300:*' });
    // Recovery's first log line comes after the daemon says it recovers (`serving` comes before).
    await waitUntil('the daemon serving, recovering', () => run.output().includes('found an open journal'));
    // status says why the node is not known yet: the interrupted operation recovery completes.
    const answer = await requestUnix(path.join(dir, 'agentd.sock'), 'POST', '/rpc', {
      jsonrpc: '2.0',
      id: 1,
      method: 'status',
    });
    const { result } = JSON.parse(answer.body) as {
      result: { daemon: { state: string }; node: { servingReason: string } };
    };
    expect(result.daemon.state).toBe('recovering');
    expect(result.node.servingReason).toBe(
      'agentd is recovering the node after a restart: operation op-1 (update) was interrupted; try again shortly',
    );
    for (const signal of ['SIGHUP', 'SIGUSR2'] as const) {
      expect(run.output(), 'still recovering').not.toContain('agentd ready');
      run.kill(signal);
      await waitUntil(`${signal} logged`, () => run.output().includes(`"msg":"${signal} ignored`));
    }
    await waitUntil('the daemon ready', () => run.output().includes('agentd ready'));
    expect(run.output()).not.toContain('stop requested while starting');
    run.kill('SIGTERM');
    const { code, signal } = await run.exited;
    expect({ code, signal }, run.output()).toEqual({ code: 0, signal: null });
    expect(await gone(path.join(dir, 'agentd.pid'))).toBe(true);
    expect(await gone(path.join(dir, 'agentd.sock'))).toBe(true);
  });

  it('two daemons started at the same instant on one PID file and socket: exactly one runs', async () => {
    for (let round = 0; round < 3; round += 1) {
      const dir = await makeTempDir();
      await mkdir(path.join(dir, 'root'), { recursive: true });
      const runs = [spawnAgentd(dir), spawnAgentd(dir)];
      const first = await Promise.race(runs.map((r, i) => r.exited.then((e) => ({ i, ...e }))));
      expect(first.code, runs[first.i]?.output()).toBe(1);
      expect(runs[first.i]?.output()).toMatch(/already running/);
      const winner = runs[1 - first.i] as Run;
      await waitUntil('the winner ready', () => winner.output().includes('agentd ready'));
      winner.kill('SIGTERM');
      expect((await winner.exited).code).toBe(0);
      expect(await gone(path.join(dir, 'agentd.pid'))).toBe(true);
      expect(await gone(path.join(dir, 'agentd.sock'))).toBe(true);
    }
  });

  it('a start that fails after the sim mirror started: the mirror is closed, the error names the file', async () => {
    const dir = await makeTempDir();
    const stateDir = path.join(dir, 'state');
    // Where the mirror records its port there is a directory: the start fails right after the
    // mirror began to listen.
    await mkdir(path.join(stateDir, 'sim-mirror.json'), { recursive: true });
    await writeFile(path.join(dir, 'config.yaml'), '');
    const config = loadDaemonConfig({
      flags: {
        config: path.join(dir, 'config.yaml'),
        sim: true,
        socket: path.join(dir, 'agentd.sock'),
        pidFile: path.join(dir, 'agentd.pid'),
        stateDir,
        root: path.join(dir, 'root'),
      },
      env: {},
      cwd: dir,
      isTTY: false,
    });
    const tcpServers = (): number =>
      process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap').length;
    const before = tcpServers();
    await expect(startDaemon(config, { logger: pino({ level: 'silent' }) })).rejects.toThrow(
      `write ${path.join(stateDir, 'sim-mirror.json')}: `,
    );
    expect(tcpServers(), 'the mirror still listens').toBe(before);
    expect(await gone(path.join(dir, 'agentd.pid'))).toBe(true);
    expect(await gone(path.join(dir, 'agentd.sock'))).toBe(true);

    // The program exits with the error (it used to hang with the mirror open).
    const run = await runAgentd(
      [
        '--config',
        path.join(dir, 'config.yaml'),
        '--sim',
        '--socket',
        path.join(dir, 'agentd.sock'),
        '--pid-file',
        path.join(dir, 'agentd.pid'),
        '--state-dir',
        stateDir,
        '--root',
        path.join(dir, 'root'),
      ],
      { cwd: dir },
    );
    expect(run.timedOut, run.stderr).toBe(false);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`agentd: write ${path.join(stateDir, 'sim-mirror.json')}: `);
  });

  it('two daemons on one state dir, each with its own socket and PID file: the second is refused naming the state dir and the first one’s PID', async () => {
    const first = await startTestDaemon();
    const dir = await makeTempDir();
    await writeFile(path.join(dir, 'config.yaml'), '');
    const second = await runAgentd([
      '--config',
      path.join(dir, 'config.yaml'),
      '--host',
      'sim',
      '--socket',
      path.join(dir, 'agentd.sock'),
      '--pid-file',
      path.join(dir, 'agentd.pid'),
      '--state-dir',
      first.stateDir,
      '--root',
      path.join(dir, 'root'),
    ]);
    expect(second.timedOut, second.stderr).toBe(false);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(
      `agentd: agentd is already running with --state-dir ${await realpath(first.stateDir)} (pid ${first.pid} holds its instance lock); stop it first with agentctl stop`,
    );
    // It wrote nothing, and the first daemon runs on.
    expect(await gone(path.join(dir, 'agentd.pid'))).toBe(true);
    expect(await gone(path.join(dir, 'agentd.sock'))).toBe(true);
    expect((await first.http('GET', '/readyz')).status).toBe(200);
    expect(await first.stop()).toBe(0);
  });

  /** agentd's flags with every path in `dir` (the state dir as given). */
  const flagsIn = (dir: string, stateDir: string): string[] => [
    '--config',
    path.join(dir, 'config.yaml'),
    '--host',
    'sim',
    '--socket',
    path.join(dir, 'run', 'agentd.sock'),
    '--pid-file',
    path.join(dir, 'run', 'agentd.pid'),
    '--state-dir',
    stateDir,
    '--root',
    path.join(dir, 'root'),
  ];

  it('a state dir agentd cannot write: exit 2 naming --state-dir, nothing written', async () => {
    const dir = await makeTempDir();
    await writeFile(path.join(dir, 'config.yaml'), '');
    const stateDir = path.join(dir, 'state');
    await mkdir(stateDir, { mode: 0o555 });
    await chmod(stateDir, 0o555);
    // Root writes any directory: run agentd as nobody then, with a socket directory it can write.
    const root = process.getuid?.() === 0;
    await mkdir(path.join(dir, 'run'));
    if (root) {
      await chmod(dir, 0o755);
      await chmod(path.join(dir, 'run'), 0o777);
    }
    const run = await runAgentd(flagsIn(dir, stateDir), root ? { user: { uid: 65534, gid: 65534 } } : {});
    expect(run.timedOut, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toMatch(
      new RegExp(
        `^agentd: --state-dir ${stateDir}: not writable \\(EACCES: permission denied, open '${stateDir}/`,
      ),
    );
    expect(await gone(path.join(dir, 'run', 'agentd.pid'))).toBe(true);
    expect(await gone(path.join(dir, 'run', 'agentd.sock'))).toBe(true);
  });

  it('a state dir that is a file: exit 2 naming --state-dir', async () => {
    const dir = await makeTempDir();
    await writeFile(path.join(dir, 'config.yaml'), '');
    await mkdir(path.join(dir, 'run'));
    const stateDir = path.join(dir, 'state');
    await writeFile(stateDir, 'not a directory');
    const run = await runAgentd(flagsIn(dir, stateDir));
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toBe(`agentd: --state-dir ${stateDir}: exists and is not a directory\n`);
    expect(await gone(path.join(dir, 'run', 'agentd.pid'))).toBe(true);
  });
});
