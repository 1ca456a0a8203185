// Why the fake API server (test/support/fake-kube): failing requests and Node watches cut at chosen moments.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { agentConfigSchema } from '../../../src/config/agent-config.js';
import type { AgentConfig } from '../../../src/config/agent-config.js';
import { createKubeClients } from '../../../src/kube/index.js';
import { createKubeSession } from '../../../src/kube/session.js';
import type { KubeSessionOptions } from '../../../src/kube/session.js';
import type { Clock } from '../../../src/host/types.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';

function make(config: Partial<KubeSessionOptions['config']>, applied: () => AgentConfig | null) {
  const createClients = vi.fn(createKubeClients);
  const session = createKubeSession({
    config: {
      kubeconfig: null,
      machineName: null,
      watch: null,
      crdGroup: 'unbounded-cloud.io',
      host: 'systemd',
      ...config,
    },
    appliedConfig: applied,
    logger: pino({ level: 'silent' }),
    clock: createTestClock(),
    env: {},
    createClients,
  });
  return { session, createClients };
}

describe('createKubeSession', () => {
  it('without credentials: connect is PRECONDITION_FAILED saying why, and no client code is asked for', async () => {
    const { session, createClients } = make({}, () => null);
    expect(session.mightHaveCredentials()).toBe(false);
    await expect(session.connect()).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
      message: expect.stringContaining('no Kubernetes credentials') as string,
    });
    await expect(session.nodeOps.cordon()).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
    expect(session.nodeOps.cordoned()).toBeNull();
    expect(createClients).not.toHaveBeenCalled();
  });

  it('with the applied config: loads the client, builds clients once, names the Machine', async () => {
    const applied = agentConfigSchema.parse(makeAgentConfig());
    const { session, createClients } = make({}, () => applied);
    expect(session.mightHaveCredentials()).toBe(true);
    const first = await session.connect();
    expect(first.machineName).toBe(applied.MachineName);
    expect(first.clients.source).toBe('bootstrap-token');
    expect(typeof first.runtime.createMachineApi).toBe('function');
    const second = await session.connect();
    expect(second.clients).toBe(first.clients);
    expect(createClients).toHaveBeenCalledTimes(1);
  });

  it('--machine-name wins over the applied config', async () => {
    const applied = agentConfigSchema.parse(makeAgentConfig());
    const { session } = make({ machineName: 'other' }, () => applied);
    expect(session.machineName()).toBe('other');
    expect((await session.connect()).machineName).toBe('other');
  });
});

/**
 * A session with a kubeconfig for a fake API server that has the Node `w1`, its cordon watch
 * retried with a fixed backoff of 100 ms doubling to 1 s.
 */
async function sessionOnFakeKube(
  o: Pick<KubeSessionOptions, 'logger' | 'onCordonChange'> & { clock: Clock },
) {
  const kube = await startFakeKube();
  onTestFinished(() => kube.close());
  kube.addNode('w1', {});
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-session-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml());
  const session = createKubeSession({
    config: { kubeconfig, machineName: 'w1', watch: null, crdGroup: 'unbounded-cloud.io', host: 'systemd' },
    appliedConfig: () => null,
    env: {},
    cordonBackoff: { baseMs: 100, maxMs: 1000, random: () => 1 },
    ...o,
  });
  return { kube, session };
}

describe('followCordon', () => {
  it('follows the Node through a watch, and retries with a growing backoff while the API server fails', async () => {
    const clock = createTestClock();
    const changes = vi.fn();
    const { kube, session } = await sessionOnFakeKube({
      logger: pino({ level: 'silent' }),
      clock,
      onCordonChange: changes,
    });
    // Three lists of the Node fail (500) before one is answered.
    kube.failNext(3, { status: 500, match: { resource: 'nodes', verb: 'list' } });
    const stop = new AbortController();
    const following = session.followCordon(stop.signal);
    await vi.waitFor(() => expect(session.nodeOps.cordoned()).toBe(false));
    expect(clock.sleeps).toEqual([100, 200, 400]);
    expect(changes).toHaveBeenCalledTimes(1);
    // A change of the Node that is not its cordon (kubelet's status) changes nothing shown.
    kube.setNodeStatus('w1', { ready: false });
    kube.patchNode('w1', { spec: { unschedulable: true } });
    await vi.waitFor(() => expect(session.nodeOps.cordoned()).toBe(true));
    expect(changes).toHaveBeenCalledTimes(2);
    expect(kube.countRequests({ resource: 'nodes', verb: 'watch' })).toBe(1);
    // While it cannot follow the Node (the watch broke, the next one fails), the cordon is
    // unknown, not a value that may have changed meanwhile; it is back once a watch resumes from
    // where the last one was (what changed since comes as events).
    const seen: Array<boolean | null> = [];
    changes.mockImplementation(() => seen.push(session.nodeOps.cordoned()));
    kube.failNext(1, { status: 500, match: { resource: 'nodes', verb: 'watch' } });
    kube.cutWatches({ abrupt: true });
    await vi.waitFor(() => expect(seen).toEqual([null, true]));
    expect(kube.countRequests({ resource: 'nodes', verb: 'list' })).toBe(4);
    expect(session.nodeOps.cordonWarning?.()).toBeNull();
    stop.abort();
    await following;
  });
});

describe('followCordon against a server that drops watches at once', () => {
  it('backs off more and more instead of watching again at once, until a watch delivers', async () => {
    // The backoff's waits, from its log lines (the clock also sleeps for the client's rate limit).
    const retries: number[] = [];
    const logger = pino(
      { level: 'warn' },
      {
        write: (line: string) => {
          const { msg, retryInMs } = JSON.parse(line) as { msg: string; retryInMs?: number };
          if (msg === 'watch of this node’s Node object failed' && retryInMs !== undefined)
            retries.push(retryInMs);
        },
      },
    );
    const { kube, session } = await sessionOnFakeKube({ logger, clock: createTestClock() });
    // Every list is answered; every watch is cut as soon as it is open.
    const stopCutting = kube.cutWatchesEvery(5);
    const stop = new AbortController();
    const following = session.followCordon(stop.signal);
    await vi.waitFor(() => expect(retries.length).toBeGreaterThanOrEqual(4), { timeout: 5000 });
    expect(retries.slice(0, 4)).toEqual([100, 200, 400, 800]);
    stopCutting();
    // A watch that delivers an event is established: the streak is over.
    await vi.waitFor(() => expect(kube.openWatches).toBe(1), { timeout: 5000 });
    kube.patchNode('w1', { spec: { unschedulable: true } });
    await vi.waitFor(() => expect(session.nodeOps.cordoned()).toBe(true));
    const failures = retries.length;
    const watches = kube.countRequests({ resource: 'nodes', verb: 'watch' });
    kube.cutWatches();
    await vi.waitFor(() =>
      expect(kube.countRequests({ resource: 'nodes', verb: 'watch' })).toBe(watches + 1),
    );
    expect(retries.length).toBe(failures); // resumed at once: no failure, no backoff
    stop.abort();
    await following;
  });
});

describe('which Node is this node’s', () => {
  it('is the one the Machine’s nodeRef names; a failed read of the Machine is an error, not a guess', async () => {
    const { kube, session } = await sessionOnFakeKube({
      logger: pino({ level: 'silent' }),
      clock: createTestClock(),
    });
    // The Machine w1 runs as the Node node-a; a Node named like the Machine exists too.
    kube.addNode('node-a', {});
    kube.putMachine({
      metadata: { name: 'w1' },
      spec: {
        kubernetes: { bootstrapTokenRef: { name: 'bootstrap-token-abcdef' }, nodeRef: { name: 'node-a' } },
      },
    });
    const unschedulable = (n: string): unknown => kube.getNode(n)?.spec?.unschedulable ?? false;

    kube.failNext(1, { status: 500, match: { resource: 'machines', verb: 'get' } });
    await expect(session.nodeOps.cordon()).rejects.toMatchObject({
      code: 'KUBE_UNAVAILABLE',
      message: expect.stringContaining('get Machine w1') as string,
    });
    expect([unschedulable('w1'), unschedulable('node-a')]).toEqual([false, false]);

    await session.nodeOps.cordon();
    expect([unschedulable('w1'), unschedulable('node-a')]).toEqual([false, true]);
  });

  it('is named like the Machine when the API server does not serve Machines', async () => {
    const { kube, session } = await sessionOnFakeKube({
      logger: pino({ level: 'silent' }),
      clock: createTestClock(),
    });
    kube.putMachine({
      metadata: { name: 'w1' },
      spec: {
        kubernetes: { bootstrapTokenRef: { name: 'bootstrap-token-abcdef' }, nodeRef: { name: 'node-a' } },
      },
    });
    kube.failNext(1, { status: 403, match: { resource: 'machines', verb: 'get' } });
    await session.nodeOps.cordon();
    expect(kube.getNode('w1')?.spec?.unschedulable).toBe(true);
  });
});
