/**
 * Every node and operations command of agentctl against the real daemon (`agentd --sim`) over
 * its socket: the human output, the `--json` shapes (exactly one JSON value on stdout) and the
 * exit codes. The tests run in order on one daemon: join, switch, operations, reset.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { runAgentctl, type CliRun } from '../support/cli.js';
import type { TestDaemon } from '../support/daemon.js';
import { startSimDaemon } from '../support/provision-fixtures.js';

interface Op {
  id: string;
  kind: string;
  state: string;
  from: string | null;
  to: string | null;
  phases: { name: string; state: string }[];
  result: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
}

let d: TestDaemon;
beforeAll(async () => {
  d = await startSimDaemon();
});
afterAll(async () => {
  await d?.dispose();
});

const ctl = (...args: string[]): Promise<CliRun> =>
  runAgentctl(['--socket', d.socket, ...args], { cwd: d.dir });
/** Run with --json: exactly one JSON value on stdout. */
async function json<T = Op>(...args: string[]): Promise<{ r: CliRun; value: T }> {
  const r = await ctl('--json', ...args);
  return { r, value: JSON.parse(r.stdout) as T };
}
const OP_KEYS = [
  'id',
  'kind',
  'state',
  'reason',
  'requestedBy',
  'idempotencyKey',
  'createdAt',
  'startedAt',
  'finishedAt',
  'from',
  'to',
  'phases',
  'result',
  'error',
].sort();

describe('before the node joins', () => {
  it('config show: not joined is NOT_FOUND, exit 1', async () => {
    const { r, value } = await json<{ error: { code: string; exitCode: number } }>('config', 'show');
    expect(r.code).toBe(1);
    expect(value.error).toMatchObject({ code: 'NOT_FOUND', exitCode: 1 });
    expect(r.stderr).toContain('no applied config: the node has not joined yet');
  });

  it('preflight passes: a table, and {ok, config, checks} with --json', async () => {
    const human = await ctl('preflight');
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^CHECK\s+RESULT\s+MESSAGE$/m);
    expect(human.stdout).toContain('all checks passed');
    const { r, value } = await json<{ ok: boolean; checks: { name: string; ok: boolean }[] }>('preflight');
    expect(r.code).toBe(0);
    expect(value.ok).toBe(true);
    expect(value.checks.map((c) => c.name)).toContain('config');
  });

  it('update --dry-run prints the plan and changes nothing', async () => {
    const human = await ctl('update', '--dry-run');
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^dry run: \(none\) → kube1; nothing was changed$/m);
    expect(human.stdout).toContain('changes:');
    const { value } = await json('update', '--dry-run');
    expect(value.result).toMatchObject({ dryRun: true, changed: true, plan: { from: null, to: 'kube1' } });
    const status = await json<{ node: { activeMachine: string | null } }>('status');
    expect(status.value.node.activeMachine).toBeNull();
  });
});

describe('update', () => {
  it('joins: --json prints only the final operation; progress lines go to stderr', async () => {
    const { r, value } = await json('update');
    expect(r.code, r.stderr).toBe(0);
    expect(Object.keys(value).sort()).toEqual(OP_KEYS);
    expect(value).toMatchObject({ kind: 'update', state: 'succeeded', from: null, to: 'kube1' });
    // Not a terminal: plain timestamped lines, one per phase transition.
    expect(r.stderr).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z {2}phase provision succeeded \(\d+\.\ds\)$/m,
    );
    expect(r.stderr).toMatch(/ {2}provision: download kubelet done \d+ B\/\d+ B/);
    expect(r.stderr).toMatch(new RegExp(`update ${value.id} \\(none\\) → kube1 succeeded$`, 'm'));
    expect(r.stderr).not.toContain('\u001b[');
  });

  it('the same config again is a no-op: exit 0, result.changed=false', async () => {
    const human = await ctl('update');
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain('nothing to change');
    const { value } = await json('update');
    expect(value.result).toMatchObject({ changed: false });
  });

  it('switches to kube2 with --kubernetes-version; human output shows the phases', async () => {
    const r = await ctl('update', '--kubernetes-version', '1.35.0');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^update op-\S+ {2}succeeded {2}kube1 → kube2 {2}took \d+\.\ds$/m);
    expect(r.stdout).toMatch(/^PHASE\s+STATE\s+TOOK\s+ERROR$/m);
    expect(r.stdout).toMatch(/^cleanup\s+succeeded/m);
  });

  it('invalid params: exit 2 naming the flag', async () => {
    const r = await ctl('update', '--kubernetes-version', 'banana');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--kubernetes-version');
    const { value } = await json<{ error: { code: string; exitCode: number } }>(
      'update',
      '--kubernetes-version',
      'banana',
    );
    expect(value.error).toMatchObject({ code: 'INVALID_PARAMS', exitCode: 2 });
    expect(r.stderr).toContain('"banana"');
  });

  it("--image 'bad ref!!' is refused at the boundary, repeating the value; nothing is started", async () => {
    const before = (await json<{ operations: Op[] }>('ops', 'list')).value.operations.length;
    const r = await ctl('update', '--image', 'bad ref!!');
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain('--image');
    expect(r.stderr).toContain('bad ref!!');
    const pre = await ctl('preflight', '--image', 'bad ref!!');
    expect(pre.code, pre.stderr).toBe(2);
    expect((await json<{ operations: Op[] }>('ops', 'list')).value.operations).toHaveLength(before);
  });

  it('--dry-run runs the preflight checks: an unreachable image fails it (IMAGE_PULL_FAILED, exit 1)', async () => {
    const image = '127.0.0.1:1/agentd/nothing:v1';
    const human = await ctl('update', '--image', image, '--dry-run');
    expect(human.code, human.stderr).toBe(1);
    expect(human.stdout).toMatch(/preflight:\n[\s\S]*FAILED image/);
    const { value } = await json<Op>('update', '--image', image, '--dry-run');
    expect(value.error?.code).toBe('IMAGE_PULL_FAILED');
    const ok = await json<Op & { result: { preflight: Array<{ ok: boolean }> } }>(
      'update',
      '--force',
      '--dry-run',
    );
    expect(ok.r.code).toBe(0);
    expect(ok.value.result.preflight.length).toBeGreaterThan(1);
    expect(ok.value.result.preflight.every((c) => c.ok)).toBe(true);
  });

  it('preflight takes the target flags of update', async () => {
    const { r, value } = await json<{ ok: boolean; checks: Array<{ name: string; message: string }> }>(
      'preflight',
      '--kubernetes-version',
      '1.36.2',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(value.checks.find((c) => c.name === 'artifact:kubelet')?.message).toContain('1.36.2');
    const both = await ctl('preflight', '--config', 'x.yaml', '--image', 'r/i:1');
    expect(both.code).toBe(2);
  });

  it('--config takes a YAML agent config file', async () => {
    const shown = await json<{ config: Record<string, Record<string, unknown>> }>('config', 'show');
    const config = shown.value.config;
    // config show redacts the token: put a real-looking one back, and change the labels.
    (config.Kubelet as { Auth: unknown }).Auth = { BootstrapToken: 'abcdef.0123456789abcdef' };
    (config.Kubelet as { Labels: unknown }).Labels = { 'example.com/role': 'cli-test' };
    const file = path.join(d.dir, 'agent-config.yaml');
    await writeFile(file, stringify(config));
    const { r, value } = await json('update', '--config', 'agent-config.yaml');
    expect(r.code, r.stderr).toBe(0);
    expect(value).toMatchObject({ state: 'succeeded', from: 'kube2', to: 'kube1' });
    const after = await json<{ machine: string; config: { Kubelet: { Labels: unknown; Auth: unknown } } }>(
      'config',
      'show',
    );
    expect(after.value.machine).toBe('kube1');
    expect(after.value.config.Kubelet.Labels).toEqual({ 'example.com/role': 'cli-test' });
    expect(JSON.stringify(after.value.config.Kubelet.Auth)).not.toContain('0123456789abcdef');
  });

  it('--detach prints the operation id alone on stdout (id=$(agentctl update --detach)), how to follow it on stderr', async () => {
    const r = await ctl('update', '--force', '--detach');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^op-\S+\n$/);
    const id = r.stdout.trim();
    expect(r.stderr).toContain(`follow it with: agentctl --socket ${d.socket} ops wait ${id}`);
    const wait = await ctl('ops', 'wait', id ?? '');
    expect(wait.code, wait.stderr).toBe(0);
  });

  it('--detach of an update with nothing to change (it ends at once): still the id alone on stdout', async () => {
    const r = await ctl('update', '--detach');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^op-\S+\n$/);
    const id = r.stdout.trim();
    expect(r.stderr).toContain(`update ${id}  succeeded`);
    expect(r.stderr).toContain('nothing to change');
    const { value } = await json('ops', 'get', id);
    expect(value).toMatchObject({ id, state: 'succeeded', result: { changed: false } });
  });
});

describe('ops', () => {
  it('list: newest first, --limit, --state, and {operations} with --json', async () => {
    const human = await ctl('ops', 'list');
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^ID\s+KIND\s+STATE\s+ROUTE\s+CREATED\s+TOOK\s+BY$/m);
    const { value } = await json<{ operations: Op[] }>('ops', 'list', '--limit', '2', '--state', 'succeeded');
    expect(value.operations).toHaveLength(2);
    expect(value.operations.every((o) => o.state === 'succeeded')).toBe(true);
    const all = await json<{ operations: Op[] }>('ops', 'list');
    expect(all.value.operations[0]?.id).toBe(value.operations[0]?.id);
  });

  it('get: the operation; an unknown id is NOT_FOUND, exit 1', async () => {
    const latest = (await json<{ operations: Op[] }>('ops', 'list', '--limit', '1')).value.operations[0];
    const { r, value } = await json('ops', 'get', latest?.id ?? '');
    expect(r.code).toBe(0);
    expect(value).toEqual(latest);
    const human = await ctl('ops', 'get', latest?.id ?? '');
    expect(human.stdout.split('\n')[0]).toContain(latest?.id);
    const missing = await ctl('ops', 'get', 'op-nope');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('op-nope');
  });

  it('wait on an operation that ended: exit 0 at once; cancel of it: PRECONDITION_FAILED, exit 1', async () => {
    const latest = (await json<{ operations: Op[] }>('ops', 'list', '--limit', '1')).value.operations[0];
    const wait = await json('ops', 'wait', latest?.id ?? '');
    expect(wait.r.code).toBe(0);
    expect(wait.value.state).toBe('succeeded');
    const cancel = await json<{ error: { code: string } }>('ops', 'cancel', latest?.id ?? '');
    expect(cancel.r.code).toBe(1);
    expect(cancel.value.error.code).toBe('PRECONDITION_FAILED');
  });
});

describe('drain and uncordon', () => {
  // The try-out daemon has no Kubernetes credentials: both are refused by the daemon.
  it.each([['drain', '--ignore-daemonsets'], ['uncordon']])(
    '%s without Kubernetes: exit 1, PRECONDITION_FAILED',
    async (...args) => {
      const { r, value } = await json<{ error: { code: string; exitCode: number } }>(...args);
      expect(r.code).toBe(1);
      expect(value.error).toMatchObject({ code: 'PRECONDITION_FAILED', exitCode: 1 });
      expect(r.stderr).toContain('Kubernetes');
    },
  );
});

describe('reset', () => {
  it('refuses without --yes when there is no terminal: exit 2', async () => {
    const r = await ctl('reset');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('pass --yes');
  });

  it('--yes tears the machines down and reports the operation', async () => {
    const { r, value } = await json('reset', '--yes');
    expect(r.code, r.stderr).toBe(0);
    expect(value).toMatchObject({ kind: 'reset', state: 'succeeded' });
    expect(value.phases.map((p) => p.name)).toEqual(['stop', 'remove']);
    const status = await json<{ node: { activeMachine: string | null; machines: { state: string }[] } }>(
      'status',
    );
    expect(status.value.node.activeMachine).toBeNull();
    expect(status.value.node.machines.every((m) => m.state === 'absent')).toBe(true);
  });
});

describe('stop', () => {
  it('stops the daemon through its PID file: SIGTERM, it exits 0', async () => {
    const { r, value } = await json<{ pid: number; signalled: boolean; forceKilled: boolean }>(
      'stop',
      '--pid-file',
      d.pidFile,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(value).toMatchObject({ pid: d.pid, signalled: true, forceKilled: false });
    expect(await d.waitExit()).toBe(0);
    const after = await ctl('status');
    expect(after.code).toBe(3);
  });
});
