/**
 * When agentd's state files disagree with the host (issue 40; docs/architecture.md, "Recovery
 * checks"), `status` says so with a typed `state-conflict` warning: which file, what it disagrees
 * with, the machine that serves, and what agentd did about it — refusing updates while the file
 * stands, or, at startup, keeping the machine that serves against the journal.
 */
import { rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { Engine } from '../../../src/engine/engine.js';
import { writeJournal } from '../../../src/engine/journal.js';
import { nodeStatePath, writeNodeState } from '../../../src/engine/node-state.js';
import type { StatusWarning } from '../../../src/engine/warnings.js';
import type { AgentError } from '../../../src/errors.js';
import type { MachineName } from '../../../src/host/types.js';
import { config, createEngineFixture, makeJournal, silentLogger, type EngineFixture } from './fakes.js';

const BASE = config();

function createEngine(f: EngineFixture): Engine {
  return new Engine({
    paths: f.paths,
    stateDir: f.stateDir,
    machines: f.machines,
    provisioner: f.provisioner,
    clock: f.clock,
    logger: silentLogger,
    metrics: f.metrics,
    events: f.events,
    defaultConfig: () => structuredClone(BASE),
    verifyTimeoutMs: 1000,
  });
}

/** A node on which `serving` runs and serves with its applied config, and node.json names `named`. */
async function node(serving: MachineName, named: MachineName): Promise<EngineFixture> {
  const f = await createEngineFixture();
  await f.applied.write(serving, structuredClone(BASE));
  await writeNodeState(f.stateDir, named, new Date(f.clock.now()));
  await f.machines.start(serving);
  await f.machines.startServices(serving);
  f.log.calls.length = 0;
  return f;
}

const conflicts = async (engine: Engine): Promise<StatusWarning[]> =>
  (await engine.status()).node.warnings.filter((w) => w.code === 'state-conflict');

describe('status: a state file that disagrees with the host', () => {
  it('node.json names kube1 while kube2 serves: the warning names node.json, the host, kube2 and the refusal', async () => {
    const f = await node('kube2', 'kube1');
    const engine = createEngine(f);
    await engine.start();
    const action =
      'agentd refuses every update (STATE_CONFLICT) and stops or removes no machine that serves on its word; move node.json aside (docs/operations.md, "A corrupt state file") and agentd decides from the host';
    expect(await conflicts(engine)).toEqual([
      {
        code: 'state-conflict',
        file: 'node.json',
        against: 'host',
        machine: 'kube2',
        action,
        message: `node.json names kube1 as the active machine, but the host has no machine kube1 and kube2 runs and serves: ${action}`,
      },
    ]);
    // What the warning says agentd does, it does: the update is refused, nothing is touched.
    const err = await engine.update({ set: { kubernetesVersion: '1.35.0' }, requestedBy: 'test' }).then(
      () => null,
      (e: unknown) => e as AgentError,
    );
    expect(err?.code).toBe('STATE_CONFLICT');
    expect(f.log.calls).toEqual([]);
    // Moved aside as the warning says: agentd decides from the host, and the warning goes.
    await rm(nodeStatePath(f.stateDir));
    await engine.refreshNode();
    expect(await conflicts(engine)).toEqual([]);
    expect((await engine.status()).node).toMatchObject({ activeMachine: 'kube2', serving: true });
    await engine.shutdown(0);
  });

  it('node.json names a machine without an applied config: against the applied configs', async () => {
    const f = await node('kube1', 'kube1');
    await f.applied.remove('kube1');
    const engine = createEngine(f);
    await engine.start();
    expect(await conflicts(engine)).toMatchObject([
      {
        file: 'node.json',
        against: 'applied-config',
        machine: 'kube1',
        message: expect.stringMatching(
          /^node\.json names kube1 as the active machine, but kube1 has no applied config: agentd refuses every update/,
        ),
      },
    ]);
    await engine.shutdown(0);
  });

  it('a closed journal that committed kube2 against a node.json naming kube1: against node.json', async () => {
    const f = await node('kube1', 'kube1');
    await writeJournal(
      f.stateDir,
      makeJournal({ closed: true, committed: true, outcome: 'succeeded', phase: 'uncordon' }),
    );
    const engine = createEngine(f);
    await engine.start();
    expect(await conflicts(engine)).toMatchObject([
      {
        file: 'journal.json',
        against: 'node.json',
        machine: 'kube1',
        message: expect.stringContaining(
          'journal.json says the last update committed kube2, but node.json names kube1',
        ),
      },
    ]);
    await engine.shutdown(0);
  });

  it('files that agree with the host: no such warning', async () => {
    const f = await node('kube1', 'kube1');
    const engine = createEngine(f);
    await engine.start();
    expect((await engine.status()).node.warnings).toEqual([]);
    await engine.shutdown(0);
  });

  it('an open journal naming a source the host does not have: recovery kept kube2, and status says so', async () => {
    const f = await node('kube2', 'kube2');
    await writeJournal(
      f.stateDir,
      makeJournal({ source: 'kube1', target: 'kube2', committed: false, phase: 'verify' }),
    );
    const engine = createEngine(f);
    const report = await engine.start();
    expect(report).toMatchObject({ ok: true, activeMachine: 'kube2' });
    expect(f.log.calls.filter((c) => /^(stop|remove) kube2$/.test(c))).toEqual([]);
    const why =
      'the open journal names kube1 as the source, but the host has no machine kube1 and no applied config of it';
    const action = 'startup recovery kept kube2, which serves, and started, stopped or removed no machine';
    expect(await conflicts(engine)).toEqual([
      {
        code: 'state-conflict',
        file: 'journal.json',
        against: 'host',
        machine: 'kube2',
        action,
        message: `${why}: ${action}`,
      },
    ]);
    // The journal is closed now and node.json names kube2: the files agree with the host again.
    expect((await engine.status()).node.warnings.map((w) => w.code)).toEqual(['state-conflict']);
    await engine.shutdown(0);
  });
});
