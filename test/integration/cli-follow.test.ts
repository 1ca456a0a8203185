/**
 * Following operations with agentctl against the real daemon: progress, BUSY, the follow
 * timeout, Ctrl-C (detach), a failed update, and the live display on a pseudo-terminal
 * (`script`). The daemon's host commands are slowed down (`latency` fault) so that operations
 * run long enough to be watched; the `kube2` machine never starts, so switching to it rolls back.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENTCTL_BIN, runAgentctl, type CliRun } from '../support/cli.js';
import { childEnv, type TestDaemon } from '../support/daemon.js';
import { SYSTEM_TESTS_REQUIRED, hasTool, startSimDaemon } from '../support/provision-fixtures.js';

interface Op {
  id: string;
  state: string;
  phases: { name: string; state: string }[];
}

// Two daemons: `slow` runs long operations to watch (every host command on kube1 takes 150 ms,
// on kube2 500 ms: an update to kube2 spends seconds before its switch-over, so it can be cancelled),
// `failing` never starts kube2, so a switch to it rolls back (and takes a second or two).
let slow: TestDaemon;
let failing: TestDaemon;
let d: TestDaemon;
beforeAll(async () => {
  [slow, failing] = await Promise.all([
    startSimDaemon({ env: { AGENTD_SIM_FAULTS: 'latency=150:kube1,latency=500:kube2' } }),
    // The cold order: kube2 fails to boot after kube1 stopped, so the update rolls back (in the
    // standby order it would fail before the node went down: update-rollback.test.ts).
    startSimDaemon({ env: { AGENTD_SIM_FAULTS: 'start-fails:kube2' }, args: ['--switch-order', 'cold'] }),
  ]);
  d = slow;
});
afterAll(async () => {
  await Promise.all([slow?.dispose(), failing?.dispose()]);
});

const ctl = (...args: string[]): Promise<CliRun> =>
  runAgentctl(['--socket', d.socket, ...args], { cwd: d.dir });

/** agentctl as a child we can signal: resolves `seen` once stderr matches `ready`. */
function spawnCtl(args: string[], ready: RegExp) {
  const proc = spawn(process.execPath, [AGENTCTL_BIN, '--socket', d.socket, ...args], {
    cwd: d.dir,
    env: childEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let onReady: () => void = () => undefined;
  const seen = new Promise<void>((resolve) => (onReady = resolve));
  proc.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  proc.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
    if (ready.test(stderr)) onReady();
  });
  const exited = new Promise<number | null>((resolve) => proc.once('close', resolve));
  return { proc, seen, exited, out: () => ({ stdout, stderr }) };
}

async function startJoin(): Promise<string> {
  const r = await ctl('--json', 'update', '--detach');
  expect(r.code, r.stderr).toBe(0);
  const op = JSON.parse(r.stdout) as Op;
  expect(['pending', 'running']).toContain(op.state);
  return op.id;
}

describe('while an operation runs', () => {
  let id: string;
  beforeAll(async () => {
    id = await startJoin();
  });

  it('another mutating command is BUSY: exit 4, the error names the running operation', async () => {
    const r = await ctl('--json', 'update', '--force');
    expect(r.code).toBe(4);
    expect(JSON.parse(r.stdout)).toMatchObject({ error: { code: 'BUSY', exitCode: 4, operation: id } });
    expect(r.stderr).toContain(id);
    const reset = await ctl('reset', '--yes');
    expect(reset.code).toBe(4);
  });

  it('ops wait --timeout: exit 5 with the operation as it is, and how to keep following', async () => {
    const r = await ctl('--json', 'ops', 'wait', id, '--timeout', '100ms');
    expect(r.code).toBe(5);
    expect(JSON.parse(r.stdout)).toMatchObject({ id, state: 'running' });
    expect(r.stderr).toContain(
      `is still running after 100ms; keep following: agentctl --socket ${d.socket} ops wait ${id}`,
    );
  });

  it('Ctrl-C detaches: exit 130, the operation keeps running, the resume command is printed', async () => {
    const child = spawnCtl(['--json', 'ops', 'wait', id], /phase \w+ running/);
    await child.seen;
    child.proc.kill('SIGINT');
    expect(await child.exited).toBe(130);
    const { stdout, stderr } = child.out();
    expect(JSON.parse(stdout)).toMatchObject({ id, state: 'running' });
    expect(stderr).toContain(
      `keeps running. Follow it again with: agentctl --socket ${d.socket} ops wait ${id}`,
    );
    const status = JSON.parse((await ctl('--json', 'status')).stdout) as { operation: { id: string } | null };
    expect(status.operation?.id).toBe(id);
  });

  it('ops wait follows it to the end: exit 0, every phase reported on stderr', async () => {
    const r = await ctl('ops', 'wait', id);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^update ${id} {2}succeeded {2}\\(none\\) → kube1`, 'm'));
    for (const phase of ['start', 'verify', 'commit']) expect(r.stderr).toContain(`phase ${phase} succeeded`);
  });
});

describe('ops cancel', () => {
  it('cancels an update before its switch-over: the operation ends cancelled (ops wait: exit 1)', async () => {
    const started = await ctl('--json', 'update', '--force', '--detach');
    expect(started.code, started.stderr).toBe(0);
    const id = (JSON.parse(started.stdout) as Op).id;
    const cancel = await ctl('ops', 'cancel', id);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(cancel.stdout).toContain(`cancel requested: update ${id}`);
    // The command to follow it names the socket it was cancelled on.
    expect(cancel.stdout).toContain(`follow it with: agentctl --socket ${d.socket} ops wait ${id}`);
    const wait = await ctl('--json', 'ops', 'wait', id);
    expect(wait.code).toBe(1);
    expect(JSON.parse(wait.stdout)).toMatchObject({ id, state: 'cancelled', error: { code: 'CANCELLED' } });
    expect(wait.stderr).toContain(`agentctl: update ${id} cancelled`);
  });
});

describe('an update that rolls back', () => {
  beforeAll(async () => {
    d = failing;
    const join = await ctl('update');
    expect(join.code, join.stderr).toBe(0);
  });

  it('exit 1; the failed phase and the error are reported', async () => {
    const r = await ctl('--json', 'update', '--force');
    expect(r.code).toBe(1);
    const op = JSON.parse(r.stdout) as Op & { error: { code: string } };
    // A machine that does not start has a code of its own; the failed host command is its cause.
    expect(op).toMatchObject({ state: 'rolled_back', error: { code: 'MACHINE_START_FAILED' } });
    expect(op.phases.find((p) => p.name === 'start')?.state).toBe('failed');
    expect(r.stderr).toMatch(/phase start failed \(\d+\.\ds\): start machine kube2: machinectl start kube2/);
    expect(r.stderr).toMatch(
      new RegExp(`agentctl: update ${op.id} rolled_back: start machine kube2: machinectl start kube2`),
    );
  });
});

// The live display needs a terminal: `script` (util-linux) runs agentctl on a pseudo-terminal.
const hasScript = hasTool('script');
describe.skipIf(!hasScript && !SYSTEM_TESTS_REQUIRED)('on a terminal', () => {
  /** Run agentctl on a pty; `input` is typed at it. Returns everything the terminal showed. */
  function onTerminal(args: string[], o: { input?: string; env?: Record<string, string> } = {}) {
    const quote = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;
    const command = [process.execPath, AGENTCTL_BIN, '--socket', d.socket, ...args].map(quote).join(' ');
    const proc = spawn('script', ['-qec', command, '/dev/null'], {
      cwd: d.dir,
      env: { ...childEnv(o.env), NO_COLOR: '', ...o.env, TERM: 'xterm', COLUMNS: '120' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let text = '';
    proc.stdout.on('data', (c: Buffer) => (text += c.toString()));
    proc.stderr.on('data', (c: Buffer) => (text += c.toString()));
    proc.stdin.end(o.input ?? '');
    return new Promise<{ code: number | null; text: string }>((resolve) =>
      proc.once('close', (code) => resolve({ code, text })),
    );
  }
  // eslint-disable-next-line no-control-regex
  const COLOR = /\u001b\[(3\d|2|1)m/;
  // eslint-disable-next-line no-control-regex
  const REDRAW = /\u001b\[\d+A\r\u001b\[J/;

  it('live progress: the phase list redrawn in place, colored; a one-line summary at the end', async () => {
    const r = await onTerminal(['update', '--force']);
    expect(r.code, r.text).toBe(1);
    expect(r.text).toMatch(REDRAW);
    expect(r.text).toMatch(COLOR);
    expect(r.text).toMatch(/✓\S* \S*preflight/);
    expect(r.text).toMatch(/✗\S* \S*start/);
    expect(r.text).toContain('\u001b[31mrolled_back\u001b[39m');
    // The summary on stdout does not repeat the phase table the live view showed.
    expect(r.text).not.toMatch(/PHASE\s+STATE/);
  });

  it('NO_COLOR: still live, never colored', async () => {
    const r = await onTerminal(['update', '--force'], { env: { NO_COLOR: '1' } });
    expect(r.code).toBe(1);
    expect(r.text).toMatch(REDRAW);
    expect(r.text).not.toMatch(COLOR);
  });

  it('--no-color: the same', async () => {
    const r = await onTerminal(['update', '--force', '--no-color']);
    expect(r.code).toBe(1);
    expect(r.text).not.toMatch(COLOR);
  });

  it('reset asks first: "n" changes nothing (exit 1)', async () => {
    const r = await onTerminal(['reset'], { input: 'n\n' });
    expect(r.code).toBe(1);
    expect(r.text).toContain('[y/N]');
    expect(r.text).toContain('not confirmed; nothing was changed');
    const status = JSON.parse((await ctl('--json', 'status')).stdout) as { node: { activeMachine: string } };
    expect(status.node.activeMachine).toBe('kube1');
  });

  it('reset asks first: "y" goes ahead and follows it live (exit 0)', async () => {
    const r = await onTerminal(['reset'], { input: 'y\n' });
    expect(r.code, r.text).toBe(0);
    expect(r.text).toMatch(/✓\S* \S*remove/);
    expect(r.text).toMatch(/reset op-\S+ {2}\S*succeeded/);
  });
});
