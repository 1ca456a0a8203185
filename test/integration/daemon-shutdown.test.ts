/**
 * Ordered shutdown of the real daemon (docs/operations.md): on SIGTERM, SIGINT or `agentctl stop` it
 * exits 0 and removes its socket and PID file, keeping the state dir. An operation that outlasts
 * `--shutdown-grace` ends the process at the end of the grace (exit 1, the operation and phase
 * named), never one that releases its lock and runs on; the next start recovers the operation.
 */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { runAgentctl } from '../support/cli.js';
import { startTestDaemon, waitUntil, type TestDaemon } from '../support/daemon.js';
import {
  JOIN_VERSION,
  NEW_VERSION,
  cloneSimNode,
  createJoinedTemplate,
  disposeSimNode,
  expectRecovered,
  followEvents,
  waitFor,
  type SimNode,
} from '../support/sim-node.js';

/** The daemon's JSON log lines, parsed. */
function logLines(text: string): Array<{ msg: string; level: string } & Record<string, unknown>> {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; level: string } & Record<string, unknown>);
}

/** Put something in the state dir that must survive the shutdown. */
async function markState(d: TestDaemon): Promise<string> {
  await mkdir(d.stateDir, { recursive: true });
  const marker = path.join(d.stateDir, 'keep-me');
  await writeFile(marker, 'journal');
  return marker;
}

async function expectCleanExit(d: TestDaemon, marker: string): Promise<void> {
  await expect(stat(d.socket)).rejects.toMatchObject({ code: 'ENOENT' });
  await expect(stat(d.pidFile)).rejects.toMatchObject({ code: 'ENOENT' });
  expect(await readFile(marker, 'utf8')).toBe('journal');
  const lines = logLines(d.logs());
  const msgs = lines.map((l) => l.msg);
  expect(msgs).toContain('agentd shutting down');
  expect(msgs.indexOf('agentd stopped')).toBeGreaterThan(msgs.indexOf('agentd shutting down'));
  // Nothing went wrong on the way down.
  expect(lines.filter((l) => l.level === 'error' || l.level === 'fatal')).toEqual([]);
}

describe('shutdown', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s: exit 0, socket and PID file removed, state dir kept',
    async (signal) => {
      const d = await startTestDaemon();
      const marker = await markState(d);
      expect((await stat(d.pidFile)).isFile()).toBe(true);
      expect(await d.stop(signal)).toBe(0);
      await expectCleanExit(d, marker);
    },
  );

  it('agentctl stop --pid-file: exit 0 and the report says signalled', async () => {
    const d = await startTestDaemon();
    const marker = await markState(d);
    const r = await runAgentctl(['--json', 'stop', '--pid-file', d.pidFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      pidFilePresent: true,
      pidFile: d.pidFile,
      pid: d.pid,
      signalled: true,
      forceKilled: false,
      graceMs: 5000,
      operation: null,
    });
    // agentctl returns once the process is gone; collect its exit code.
    expect(await d.waitExit()).toBe(0);
    await expectCleanExit(d, marker);
  });

  it('agentctl stop in human form says it stopped, and a second stop finds nothing', async () => {
    const d = await startTestDaemon();
    const r = await runAgentctl(['stop', '--pid-file', d.pidFile]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`agentd (pid ${d.pid}) stopped`);
    expect(await d.waitExit()).toBe(0);
    const again = await runAgentctl(['stop', '--pid-file', d.pidFile]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('nothing to stop');
  });

  it('SIGHUP, SIGUSR1 and SIGUSR2 are logged and ignored: no inspector opens, agentd serves on, and SIGTERM still stops it cleanly', async () => {
    // Were the inspector to open, it would on a port of its own choosing, and say so on stderr.
    const d = await startTestDaemon({ env: { NODE_OPTIONS: '--inspect-port=0' } });
    const marker = await markState(d);
    const said = {
      SIGHUP:
        'SIGHUP ignored: agentd has no reload; to apply a changed config file, flag or environment, restart it (systemctl restart agentd)',
      SIGUSR1: 'SIGUSR1 ignored: agentd never opens the Node.js inspector',
      SIGUSR2: 'SIGUSR2 ignored: agentd has no use for it',
    } as const;
    for (const [signal, msg] of Object.entries(said) as [keyof typeof said, string][]) {
      d.proc.kill(signal);
      await waitUntil(`${signal} logged`, () => logLines(d.logs()).some((l) => l.msg === msg), d);
      expect((await d.http('GET', '/readyz')).status).toBe(200);
    }
    expect(logLines(d.logs()).find((l) => l.msg === said.SIGHUP)).toMatchObject({
      level: 'warn',
      signal: 'SIGHUP',
    });
    expect(d.logs()).not.toContain('Debugger listening');
    expect(await d.stop('SIGTERM')).toBe(0);
    await expectCleanExit(d, marker);
  });

  it('an open event stream does not hold the shutdown up', async () => {
    const d = await startTestDaemon();
    const streamClosed = new Promise<void>((resolve) => {
      http.get({ socketPath: d.socket, path: '/v1/events' }, (res) => {
        res.once('data', () => d.proc.kill('SIGTERM'));
        res.on('close', () => resolve());
        res.resume();
      });
    });
    await streamClosed;
    expect(await d.waitExit()).toBe(0);
    expect(d.logs()).toContain('agentd stopped');
  });
});

describe('shutdown with an operation in flight', () => {
  let template: SimNode;
  beforeAll(async () => {
    template = await createJoinedTemplate();
  });
  afterAll(async () => {
    await disposeSimNode(template);
  });

  it('past the point of no return and longer than --shutdown-grace: exit 1 at the end of the grace naming the operation and phase; the next start recovers it', async () => {
    const node = await cloneSimNode(template);
    // Every host command on kube1 takes 2 s: stopping it outlasts a 1 s grace by far.
    const d = await node.start({ faults: 'latency=2000:kube1', args: ['--shutdown-grace', '1s'] });
    const events = await followEvents(node.socket);
    onTestFinished(() => events.close());
    const op = await node.update({ set: { kubernetesVersion: NEW_VERSION } });
    await events.next((e) => e.operationId === op.id && e.phase === 'stop' && e.state === 'running');
    await waitFor('the journal to say the source is stopping (no cancel from here)', async () => {
      const j = await node.readJournal();
      return j.operationId === op.id && j.sourceStopped === true;
    });
    d.proc.kill('SIGTERM');
    expect(await d.waitExit(), d.logs()).toBe(1);

    const journal = await node.readJournal();
    expect(journal).toMatchObject({ operationId: op.id, closed: false });
    const lines = logLines(d.logs());
    const over = lines.find((l) => l.msg.startsWith('shutdown grace over'));
    expect(over, d.logs()).toMatchObject({
      level: 'error',
      operation: op.id,
      kind: 'update',
      phase: journal.phase,
      msg: `shutdown grace over: operation ${op.id} (update) still runs in phase ${String(journal.phase)}; exiting now without finishing it — the next start of agentd recovers it`,
    });
    // Nothing ran after it, and the clean-up that releases the PID file and the lock did not run
    // while the operation was still going.
    expect(lines.at(-1)).toBe(over);
    expect(lines.map((l) => l.msg)).not.toContain('agentd stopped');
    await expect(stat(d.pidFile)).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(stat(d.socket)).rejects.toMatchObject({ code: 'ENOENT' });

    // The next start recovers the update from the journal: back to kube1, nothing committed.
    await node.start();
    const recovered = await expectRecovered(node, { active: 'kube1', version: JOIN_VERSION });
    expect(recovered.id).toBe(op.id);
    expect((recovered.result?.recovery as { interruptedIn: string }).interruptedIn).toBe(journal.phase);
    await node.stop();
  });
});
