import { describe, expect, it } from 'vitest';
import { renderStatus } from '../../../../src/cli/commands/status.js';
import { createCliContext } from '../../../../src/cli/context.js';
import { createOutput } from '../../../../src/cli/output.js';
import type { MethodTypes } from '../../../../src/rpc/methods/index.js';

type Status = MethodTypes['status']['result'];
type Operation = NonNullable<Status['operation']>;

const NOW = Date.parse('2026-03-01T12:00:00Z');

function ctx(color: boolean) {
  const stream = { isTTY: color, write: () => true } as unknown as NodeJS.WriteStream;
  const out = createOutput({ json: false, colorFlag: true, env: {}, stdout: stream, stderr: stream });
  return createCliContext({ socket: '/x.sock', json: false, timeoutMs: undefined, color }, out, {}, '/');
}

function operation(o: Partial<Operation>): Operation {
  return {
    id: 'op-1',
    kind: 'update',
    state: 'running',
    reason: null,
    requestedBy: 'agentctl',
    idempotencyKey: null,
    createdAt: '2026-03-01T11:58:00Z',
    startedAt: '2026-03-01T11:58:00Z',
    finishedAt: null,
    from: 'kube1',
    to: 'kube2',
    phases: [],
    result: null,
    error: null,
    ...o,
  };
}

const joined: Status = {
  daemon: { version: '1.2.3', pid: 4242, startedAt: '2026-03-01T10:55:30Z', state: 'ready' },
  node: {
    activeMachine: 'kube1',
    serving: true,
    servingReason: null,
    applied: {
      kubernetesVersion: '1.34.0',
      image: 'registry.example/kube:1.34',
      hash: 'abcdef0123456789ffff',
    },
    machines: [
      { name: 'kube1', state: 'running', kubelet: 'active' },
      { name: 'kube2', state: 'absent', kubelet: 'inactive' },
    ],
    cordoned: false,
    warnings: ['kube2 has a leftover rootfs'],
    warningDetails: [{ code: 'host', message: 'kube2 has a leftover rootfs' }],
    repair: null,
    // Read before the running operation started: older than a status read now.
    observedAt: '2026-03-01T11:58:30Z',
  },
  operation: operation({
    id: 'op-2',
    phases: [
      { name: 'prepare', state: 'succeeded', startedAt: null, finishedAt: null, error: null },
      { name: 'provision', state: 'running', startedAt: null, finishedAt: null, error: null },
    ],
  }),
  lastOperation: operation({
    id: 'op-1',
    state: 'rolled_back',
    finishedAt: '2026-03-01T11:00:00Z',
    error: { code: 'VERIFY_FAILED', message: 'kubelet did not become active' },
  }),
  watcher: {
    enabled: true,
    reason: null,
    connected: false,
    machineName: 'node-a',
    lastEventAt: null,
    lastReconcileAt: null,
    lastError: 'connection refused',
    lastErrorCode: 'KUBE_UNAVAILABLE',
    blocked: null,
  },
};

const fresh: Status = {
  daemon: { version: '1.2.3', pid: 7, startedAt: '2026-03-01T11:59:50Z', state: 'recovering' },
  node: {
    activeMachine: null,
    serving: false,
    servingReason:
      'agentd is recovering the node after a restart: operation op-1 (update) was interrupted; try again shortly',
    applied: null,
    machines: [
      { name: 'kube1', state: 'absent', kubelet: 'inactive' },
      { name: 'kube2', state: 'absent', kubelet: 'inactive' },
    ],
    cordoned: null,
    warnings: [],
    warningDetails: [],
    repair: null,
    observedAt: null,
  },
  operation: null,
  lastOperation: null,
  watcher: null,
};

describe('renderStatus', () => {
  it('renders a joined node with an operation, the last one, the watcher and warnings', () => {
    expect(renderStatus(joined, ctx(false), NOW)).toBe(
      [
        'serving   yes',
        'agentd 1.2.3  pid 4242  up 1h 4m  ready',
        'node      active kube1  kubernetes 1.34.0  image registry.example/kube:1.34  config abcdef012345',
        '          schedulable',
        '',
        'MACHINE  STATE    KUBELET',
        'kube1    running  active    (active)',
        'kube2    absent   inactive',
        '(machines as read 1m 30s ago)',
        '',
        'operation op-2  update  running  phase provision',
        'last      op-1  update  rolled_back  1h 0m ago  kubelet did not become active',
        'watcher   node-a  disconnected  last error: connection refused',
        'warning: kube2 has a leftover rootfs',
      ].join('\n'),
    );
  });

  it('renders a fresh node: not joined, no operations, no watcher line', () => {
    expect(renderStatus(fresh, ctx(false), NOW)).toBe(
      [
        'serving   NO  agentd is recovering the node after a restart: operation op-1 (update) was interrupted; try again shortly',
        'agentd 1.2.3  pid 7  up 10s  recovering',
        'node      active none  recovering: the node state is not known yet',
        '',
        'MACHINE  STATE   KUBELET',
        'kube1    absent  inactive',
        'kube2    absent  inactive',
        '',
        'operation none',
      ].join('\n'),
    );
  });

  it('a daemon that is starting (nothing to recover) says starting, not recovering', () => {
    const starting: Status = {
      ...fresh,
      daemon: { ...fresh.daemon, state: 'starting' },
      node: {
        ...fresh.node,
        servingReason: 'agentd is starting and has not read the node yet; try again shortly',
      },
    };
    expect(renderStatus(starting, ctx(false), NOW).split('\n').slice(0, 3)).toEqual([
      'serving   NO  agentd is starting and has not read the node yet; try again shortly',
      'agentd 1.2.3  pid 7  up 10s  starting',
      'node      active none  starting: the node state is not known yet',
    ]);
  });

  it('says first that a joined node does not serve, and why', () => {
    const down = {
      ...joined,
      node: { ...joined.node, serving: false, servingReason: 'the active machine kube1 is not running' },
    };
    expect(renderStatus(down, ctx(false), NOW).split('\n')[0]).toBe(
      'serving   NO  the active machine kube1 is not running',
    );
  });

  it('says how old the machines are only when they were read more than 2 s ago', () => {
    const at = (ms: number) => ({
      ...joined,
      node: { ...joined.node, observedAt: new Date(NOW - ms).toISOString() },
    });
    expect(renderStatus(at(1900), ctx(false), NOW)).not.toContain('as read');
    expect(renderStatus(at(2000), ctx(false), NOW)).toContain('\n(machines as read 2s ago)\n');
  });

  it('says "not joined" once the daemon is ready, not while it recovers', () => {
    const ready = { ...fresh, daemon: { ...fresh.daemon, state: 'ready' as const } };
    expect(renderStatus(ready, ctx(false), NOW)).toContain('node      active none  not joined');
  });

  it('shows what recovery did to an interrupted last operation', () => {
    const interrupted = {
      ...joined,
      lastOperation: operation({
        id: 'op-1',
        state: 'interrupted',
        finishedAt: '2026-03-01T11:00:00Z',
        result: { recovery: { interruptedIn: 'stop', outcome: 'rolled back to kube1', actions: [] } },
      }),
    };
    expect(renderStatus(interrupted, ctx(false), NOW)).toContain(
      '\n          agentd stopped during it; recovery rolled back to kube1\n',
    );
  });

  it('wraps a long error of the last operation', () => {
    const long = 'x '.repeat(120).trim();
    const failed = {
      ...joined,
      lastOperation: operation({
        id: 'op-1',
        state: 'failed',
        finishedAt: '2026-03-01T11:00:00Z',
        error: { code: 'COMMAND_FAILED', message: long },
      }),
    };
    const lines = renderStatus(failed, ctx(false), NOW).split('\n');
    const at = lines.findIndex((l) => l.startsWith('last '));
    expect(lines[at]!.length).toBeLessThanOrEqual(100);
    expect(lines[at + 1]).toMatch(/^ {10}x x/);
  });

  it('says why the watcher is off', () => {
    const off = {
      ...fresh,
      watcher: {
        enabled: false,
        reason: 'no Kubernetes credentials',
        connected: false,
        machineName: null,
        lastEventAt: null,
        lastReconcileAt: null,
        lastError: null,
        lastErrorCode: null,
        blocked: null,
      },
    };
    expect(renderStatus(off, ctx(false), NOW).split('\n').at(-1)).toBe(
      'watcher   off  no Kubernetes credentials',
    );
  });

  it('shows a target the watcher does not apply again, and why', () => {
    const blocked: Status = {
      ...joined,
      watcher: {
        ...joined.watcher!,
        lastError: null,
        blocked: {
          target: { kubernetesVersion: '1.35.0' },
          repaveCounter: 4,
          operationId: 'op-7',
          outcome: 'rolled_back',
          code: 'HEALTH_GATE_FAILED',
          reason:
            'update op-7 rolled back (HEALTH_GATE_FAILED): not applied again until the Machine asks anew',
          since: '2026-03-01T11:00:00Z',
        },
      },
    };
    const lines = renderStatus(blocked, ctx(false), NOW).split('\n');
    const i = lines.findIndex((l) => l.startsWith('blocked'));
    expect(lines[i]).toBe(
      'blocked   kubernetes 1.35.0 (repaveCounter 4)  update op-7 rolled back (HEALTH_GATE_FAILED): not',
    );
    expect(lines[i + 1]).toBe('          applied again until the Machine asks anew');
  });

  it('says cordoned when the node is cordoned', () => {
    const cordoned = { ...joined, node: { ...joined.node, cordoned: true } };
    expect(renderStatus(cordoned, ctx(false), NOW)).toContain('\n          cordoned\n');
  });

  it('colors states on a terminal and keeps the table aligned', () => {
    const text = renderStatus(joined, ctx(true), NOW);
    expect(text).toContain('\u001b[32mready\u001b[39m');
    expect(text).toContain('\u001b[31mrolled_back\u001b[39m');
    // eslint-disable-next-line no-control-regex
    const plain = text.replace(/\u001b\[[0-9;]*m/g, '');
    expect(plain).toBe(renderStatus(joined, ctx(false), NOW));
  });

  it('has no escape codes without a terminal', () => {
    expect(renderStatus(joined, ctx(false), NOW)).not.toContain('\u001b[');
  });
});
