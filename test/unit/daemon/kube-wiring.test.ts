// Why the fake API server (test/support/fake-kube): no fault: the wiring needs a server to point a kubeconfig at, in the unit project (no control plane).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../../../src/config/agent-config.js';
import type { AgentConfig } from '../../../src/config/agent-config.js';
import { EventBus } from '../../../src/engine/events.js';
import type { Operation } from '../../../src/engine/operation.js';
import { createKubeClients } from '../../../src/kube/index.js';
import type { CreateKubeClientsOptions } from '../../../src/kube/index.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import type { Dispatcher } from '../../../src/rpc/dispatcher.js';
import { createKubeWiring } from '../../../src/daemon/kube-wiring.js';
import type { KubeWiring, KubeWiringOptions } from '../../../src/daemon/kube-wiring.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube } from '../../support/fake-kube.js';

type Config = KubeWiringOptions['config'];
const base: Config = {
  kubeconfig: null,
  machineName: null,
  watch: null,
  crdGroup: 'unbounded-cloud.io',
  host: 'systemd',
  fleet: true,
  fleetNamespace: 'agentd-system',
  // Read only when a watcher runs (an absent record is none); no test here makes it write one.
  stateDir: path.join(os.tmpdir(), `agentd-kube-wiring-state-${process.pid}`),
};

/** A dispatcher answering only what the watcher asks first: the node has not joined. */
const notJoined: Pick<Dispatcher, 'handle'> = {
  handle: async (body) => ({
    jsonrpc: '2.0',
    id: (body as { id: number }).id,
    error: { code: 1003, message: 'not joined', data: { code: 'NOT_FOUND' } },
  }),
};

function finished(): Operation {
  return {
    id: 'op-1',
    kind: 'update',
    state: 'succeeded',
    reason: null,
    requestedBy: 'agentctl',
    idempotencyKey: null,
    createdAt: '',
    startedAt: null,
    finishedAt: null,
    from: null,
    to: 'kube1',
    phases: [],
    result: null,
    error: null,
  };
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('createKubeWiring', () => {
  let dir: string;
  let wiring: KubeWiring | undefined;
  let applied: AgentConfig | null;
  const factoryCalls: CreateKubeClientsOptions[] = [];
  const events = new EventBus();

  function make(config: Partial<Config>, createClients?: typeof createKubeClients): KubeWiring {
    wiring = createKubeWiring({
      config: { ...base, ...config },
      appliedConfig: () => applied,
      events,
      logger: pino({ level: 'silent' }),
      clock: createTestClock(),
      metrics: createMetrics({ version: 't', collectDefaults: false }),
      env: {},
      createClients:
        createClients ??
        ((o) => {
          factoryCalls.push(o);
          return createKubeClients(o);
        }),
      watcher: { backoff: { baseMs: 10, maxMs: 20, random: () => 0 } },
    });
    return wiring;
  }

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-kube-wiring-'));
    applied = null;
    factoryCalls.length = 0;
  });
  afterEach(async () => {
    await wiring?.stop();
    wiring = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  it('uses no Kubernetes on the simulated host without --kubeconfig, and says so', async () => {
    applied = agentConfigSchema.parse(makeAgentConfig());
    const w = make({ host: 'sim' });
    expect(w.nodeOps.unavailableReason()).toContain('--kubeconfig');
    expect(w.updateDrainer()).toBeNull();
    w.start(notJoined);
    await until('the first look', () => w.watcherStatus().reason?.includes('--kubeconfig') === true);
    expect(w.watcherStatus()).toMatchObject({ enabled: false, connected: false });
    expect(factoryCalls).toEqual([]);
  });

  it('takes credentials from the applied config, once per set of credentials', async () => {
    const w = make({});
    expect(w.nodeOps.unavailableReason()).toContain('no Kubernetes credentials');
    applied = agentConfigSchema.parse(makeAgentConfig());
    // The client library is loaded only once a credential source may exist.
    expect(w.nodeOps.unavailableReason()).toContain('still loading');
    await w.validate();
    expect(w.nodeOps.unavailableReason()).toBeNull();
    expect(w.updateDrainer()).not.toBeNull();
    expect(w.nodeOps.unavailableReason()).toBeNull();
    expect(factoryCalls.filter((c) => c.appliedConfig !== null)).toHaveLength(1);
    applied = agentConfigSchema.parse(
      makeAgentConfig({
        Kubelet: { ...makeAgentConfig().Kubelet, Auth: { BootstrapToken: 'zzz999.0123456789abcdef' } },
      }),
    );
    expect(w.nodeOps.unavailableReason()).toBeNull();
    expect(factoryCalls.filter((c) => c.appliedConfig !== null)).toHaveLength(2);
    expect(factoryCalls.every((c) => c.inCluster === true && c.crdGroup === 'unbounded-cloud.io')).toBe(true);
  });

  it('with credentials the fleet gate is wired; --no-fleet: never a gate, and fleet calls say why', async () => {
    applied = agentConfigSchema.parse(makeAgentConfig());
    const on = make({});
    await on.validate();
    expect(on.fleetGate()).not.toBeNull();
    await on.stop();

    const off = make({ fleet: false });
    await off.validate();
    expect(off.nodeOps.unavailableReason()).toBeNull();
    expect(off.fleetGate()).toBeNull();
    expect(off.healthChecks()).toBeNull();
    expect(off.fleet()).toEqual({ unavailable: expect.stringContaining('--no-fleet') });
  });

  it('refuses a --kubeconfig that cannot be loaded at start', async () => {
    const w = make({ kubeconfig: path.join(dir, 'missing') });
    await expect(w.validate()).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
  });

  it('needs a node name: --machine-name, else the applied config MachineName', async () => {
    const kube = await startFakeKube();
    try {
      const file = path.join(dir, 'kubeconfig');
      await writeFile(file, kube.kubeconfigYaml());
      const first = make({ kubeconfig: file });
      await first.validate();
      expect(first.nodeOps.unavailableReason()).toContain('no node name');
      applied = agentConfigSchema.parse(makeAgentConfig());
      expect(wiring?.nodeOps.unavailableReason()).toBeNull();
      await wiring?.stop();
      const second = make({ kubeconfig: file, watch: false });
      await second.validate();
      expect(second.nodeOps.unavailableReason()).toBeNull();
      wiring?.start(notJoined);
      await until('the first look', () => wiring?.watcherStatus().reason === 'disabled by --no-watch');
      expect(wiring?.watcherStatus().machineName).toBe('worker-01');
    } finally {
      await wiring?.stop();
      await kube.close();
    }
  });

  it("gives the health gate this node's Node (named like the Machine, else its nodeRef), or why not", async () => {
    const none = make({});
    expect(none.nodeHealth()).toEqual({ unavailable: expect.stringContaining('no Kubernetes credentials') });
    await none.stop();
    const kube = await startFakeKube();
    try {
      const file = path.join(dir, 'kubeconfig');
      await writeFile(file, kube.kubeconfigYaml());
      kube.addNode('worker-01', { kubeletVersion: 'v1.34.0' });
      // The client library is not loaded yet: the source waits for it instead of saying "none".
      const w = make({ kubeconfig: file, machineName: 'worker-01', watch: false });
      const source = w.nodeHealth();
      if (!('read' in source)) throw new Error(`expected a Node source, got ${source.unavailable}`);
      expect(await source.read(new AbortController().signal)).toMatchObject({
        name: 'worker-01',
        ready: true,
        kubeletVersion: 'v1.34.0',
      });
      kube.putMachine({
        metadata: { name: 'worker-01' },
        spec: { kubernetes: { bootstrapTokenRef: { name: 't' }, nodeRef: { name: 'node-b' } } },
      });
      kube.addNode('node-b', { kubeletVersion: 'v1.35.0' });
      const again = w.nodeHealth();
      if (!('read' in again)) throw new Error('expected a Node source');
      expect(await again.read(new AbortController().signal)).toMatchObject({
        name: 'node-b',
        kubeletVersion: 'v1.35.0',
      });
    } finally {
      await wiring?.stop();
      await kube.close();
    }
  });

  it('starts the watcher once an operation ends with what it needs (a join), and stops it', async () => {
    const kube: FakeKube = await startFakeKube();
    try {
      const file = path.join(dir, 'kubeconfig');
      await writeFile(file, kube.kubeconfigYaml());
      const w = make({ kubeconfig: file });
      w.start(notJoined);
      await until('the first look', () => w.watcherStatus().reason?.includes('no node name') === true);
      applied = agentConfigSchema.parse(makeAgentConfig());
      events.publish({ type: 'operation', operation: finished() });
      await until('the watcher', () => w.watcherStatus().connected);
      expect(w.watcherStatus()).toMatchObject({ enabled: true, machineName: 'worker-01', reason: null });
      expect(kube.getMachine('worker-01')).toBeDefined();
      await w.stop();
      expect(w.watcherStatus().connected).toBe(false);
      await until('the watch stream to close', () => kube.openWatches === 0);
    } finally {
      await kube.close();
    }
  });
});
