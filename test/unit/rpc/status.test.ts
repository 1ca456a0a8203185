// Why the fake API server (test/support/fake-kube): a Node watch cut at a chosen moment, between two status answers.
/**
 * `status` is serialized once per status version: every input of the answer, changed alone,
 * must give a different answer — and the answer served must always be the one computed afresh.
 * The parts are the real ones (engine, Kubernetes wiring against the fake API server, watcher,
 * dispatcher, the status method), assembled by the daemon's own assembly (`assembleDaemon`).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Engine } from '../../../src/engine/engine.js';
import { writeJournal } from '../../../src/engine/journal.js';
import { STATUS_MAX_AGE_MS } from '../../../src/engine/status-reader.js';
import type { Dispatcher } from '../../../src/rpc/dispatcher.js';
import { status } from '../../../src/rpc/methods/status.js';
import type { DaemonState, RpcServices } from '../../../src/rpc/services.js';
import type { KubeWiring } from '../../../src/daemon/kube-wiring.js';
import { startFakeKube, type FakeKube } from '../../support/fake-kube.js';
import { makeJournal, type EngineFixture } from '../engine/fakes.js';
import { assembled } from './assembled.js';

const NODE = 'worker-01';

interface Harness {
  f: EngineFixture;
  engine: Engine;
  kube: FakeKube;
  wiring: KubeWiring;
  dispatcher: Dispatcher;
  services: RpcServices;
  daemonState: { set(v: DaemonState): void };
}

let cleanup: (() => Promise<void>) | null = null;
afterEach(async () => {
  await cleanup?.();
  cleanup = null;
});

async function setup(options: { journal?: boolean } = {}): Promise<Harness> {
  const kube = await startFakeKube();
  kube.addNode(NODE);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-status-'));
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml());
  const a = await assembled({
    flags: { kubeconfig, machineName: NODE },
    machineName: NODE,
    kube: { watcher: { backoff: { baseMs: 10, maxMs: 20, random: () => 0 } } },
  });
  if (options.journal) {
    // An update interrupted after it cordoned the node: recovery leaves an uncordon pending.
    await writeJournal(
      a.f.stateDir,
      makeJournal({ cordonedByUs: true, sourceStopped: false, phase: 'drain' }),
    );
  }
  cleanup = async () => {
    await a.close();
    await kube.close();
    await rm(dir, { recursive: true, force: true });
  };
  return {
    f: a.f,
    engine: a.engine,
    kube,
    wiring: a.kube,
    dispatcher: a.dispatcher,
    services: a.services,
    daemonState: a.daemonState,
  };
}

/** The `status` answer as served (from the cache while the version holds). */
async function served(h: Harness): Promise<string> {
  const text = await h.dispatcher.handleText('{"jsonrpc":"2.0","id":1,"method":"status"}', 'test');
  return JSON.stringify((JSON.parse(text!.toString()) as { result: unknown }).result);
}

/** The `status` answer computed afresh, bypassing every cache. */
async function fresh(h: Harness): Promise<string> {
  return JSON.stringify(await status.handler({}, { caller: 'test', services: h.services }));
}

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * Change one input; the served answer must differ from the one before and equal the fresh one.
 * `settled` waits for a change that lands asynchronously (the watcher's connection).
 */
async function expectChange(
  h: Harness,
  what: string,
  change: () => unknown,
  settled?: () => boolean,
): Promise<void> {
  const before = await served(h);
  expect(before, `${what}: served before`).toBe(await fresh(h));
  await change();
  if (settled) await until(what, settled);
  const after = await served(h);
  expect(after, `${what}: the answer did not change`).not.toBe(before);
  expect(after, `${what}: a stale answer was served`).toBe(await fresh(h));
}

describe('status: every input changes the answer', () => {
  // Retried once: it timed out once on Node 26 in a full run, never alone.
  it('daemon state, node, operations, cordon and watcher, each changed alone', { retry: 1 }, async () => {
    const h = await setup();
    h.daemonState.set('recovering');
    await h.engine.start();
    await expectChange(h, 'daemon state', () => h.daemonState.set('ready'));

    // The node, as read from the host: a machine starts behind agentd's back, then a refresh.
    await expectChange(h, 'node snapshot', async () => {
      h.f.machines.running.add('kube2');
      await h.engine.refreshNode();
    });

    // A running operation, each of its events, its end and the node it leaves behind.
    const held = h.f.log.hold('stage kube1');
    let op!: Awaited<ReturnType<Engine['update']>>;
    await expectChange(h, 'operation started', async () => {
      op = await h.engine.update({ requestedBy: 'test' });
      await held.reached;
    });
    const ended = h.engine.waitOperation(op.id, undefined);
    await expectChange(h, 'operation phases and end', async () => {
      held.release();
      await ended;
    });

    // The cordon, as agentd last saw it.
    await expectChange(h, 'cordon', () => h.wiring.nodeOps.cordon());
    await expectChange(h, 'uncordon', () => h.wiring.nodeOps.uncordon());

    // The watcher: its reason while off, then its connection.
    h.wiring.start(h.dispatcher);
    await until('the watcher', () => h.wiring.watcherStatus().connected);
    // Its next request for the Machine waits at a gate until the lost connection has been seen:
    // a reconnect between two looks (seen on a busy run), or a window shorter than the test's
    // timer on a loaded machine (CI, Node 26), would leave nothing to see.
    let reopen!: () => void;
    const gate = new Promise<void>((resolve) => (reopen = resolve));
    h.kube.beforeNext(
      (r) => r.resource === 'machines' && r.method === 'GET',
      () => gate,
    );
    try {
      await expectChange(
        h,
        'watcher connection',
        () => h.kube.cutWatches({ abrupt: true }),
        () => !h.wiring.watcherStatus().connected,
      );
    } finally {
      reopen();
    }
    await until('the watch again', () => h.wiring.watcherStatus().connected);
    expect(await served(h)).toBe(await fresh(h));

    await expectChange(h, 'daemon draining', () => h.daemonState.set('draining'));
  });

  it('startup recovery and the uncordon it left pending', async () => {
    const h = await setup({ journal: true });
    const before = await served(h);
    await h.engine.start();
    expect(h.engine.pendingUncordon).not.toBeNull();
    const after = await served(h);
    expect(after).not.toBe(before);
    expect(after).toBe(await fresh(h));
    expect(after).toContain('still cordoned by interrupted operation');
    // Once the Kubernetes client is loaded, agentd takes the cordon back; the warning goes.
    await h.wiring.validate();
    await expectChange(h, 'pending uncordon done', async () => {
      await h.engine.completePendingUncordon();
    });
    expect(await served(h)).not.toContain('still cordoned by interrupted operation');
  });

  it('an old snapshot: a status call reads the node again, and the answer shows what changed', async () => {
    const h = await setup();
    await h.engine.start();
    const before = await served(h);
    // The host changes behind agentd's back; nothing tells agentd.
    h.f.machines.running.add('kube1');
    expect(await served(h)).toBe(before);
    // Still young (the age is measured on the injected clock): the cached answer holds.
    h.f.clock.advance(STATUS_MAX_AGE_MS - 1);
    expect(await served(h)).toBe(before);
    // Once the snapshot is old, a status call reads the node. (This fixture's clock ends every
    // sleep at once, so the call's wait for the read ends at once too: a later call shows it.
    // test/unit/engine/engine.test.ts holds the wait on a clock of its own.)
    h.f.clock.advance(1);
    const machines = async (): Promise<unknown[]> =>
      (JSON.parse(await served(h)) as { node: { machines: unknown[] } }).node.machines;
    const kube1 = { name: 'kube1', state: 'running', kubelet: 'inactive' };
    await until('a status that shows the change', async () =>
      (await machines()).some((m) => JSON.stringify(m) === JSON.stringify(kube1)),
    );
    expect(await served(h)).toBe(await fresh(h));
  });
});
