/**
 * Read-your-writes: whoever learns that an operation ended — its event, `operations.wait`, an
 * update with `wait` — sees its effect in the very next `status`; and a node refresh asked for
 * while an older one runs is not answered by that older read.
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../../src/engine/engine.js';
import { writeNodeState } from '../../../src/engine/node-state.js';
import { FINAL_STATES, type NodeStatus } from '../../../src/engine/operation.js';
import { config, createEngineFixture, silentLogger, type EngineFixture } from './fakes.js';

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

/** What `status` showed when asked as each operation's final event was published, by operation id. */
function statusAtEnd(f: EngineFixture, engine: Engine): Map<string, Promise<NodeStatus>> {
  const seen = new Map<string, Promise<NodeStatus>>();
  f.events.subscribe((_seq, e) => {
    if (e.type === 'operation' && FINAL_STATES.has(e.operation.state)) {
      seen.set(
        e.operation.id,
        engine.status().then((s) => structuredClone(s.node)),
      );
    }
  });
  return seen;
}

describe('read-your-writes', () => {
  it('the final event of a join, an update and a reset comes after the node shows their effect', async () => {
    const f = await createEngineFixture();
    const engine = createEngine(f);
    await engine.start();
    const atEnd = statusAtEnd(f, engine);

    const join = await engine.update({ wait: true, requestedBy: 'test' });
    expect(join.state).toBe('succeeded');
    expect(await atEnd.get(join.id)).toMatchObject({
      activeMachine: 'kube1',
      applied: { kubernetesVersion: '1.34.0' },
    });

    const update = await engine.update({
      set: { kubernetesVersion: '1.35.0' },
      wait: true,
      requestedBy: 'test',
    });
    expect(update.state).toBe('succeeded');
    expect(await atEnd.get(update.id)).toMatchObject({
      activeMachine: 'kube2',
      applied: { kubernetesVersion: '1.35.0' },
    });

    const reset = await engine.reset({ wait: true, requestedBy: 'test' });
    expect(reset.state).toBe('succeeded');
    expect(await atEnd.get(reset.id)).toMatchObject({ activeMachine: null, applied: null });
    await engine.shutdown(0);
  });

  it('operations.wait called as the operation ends answers once status shows its effect', async () => {
    const f = await createEngineFixture();
    const engine = createEngine(f);
    await engine.start();
    // A follower that sees the final event asks operations.wait (as agentctl does), then status.
    let seen: Promise<NodeStatus> | null = null;
    f.events.subscribe((_seq, e) => {
      if (e.type === 'operation' && FINAL_STATES.has(e.operation.state)) {
        const id = e.operation.id;
        seen ??= engine
          .waitOperation(id, undefined)
          .then(() => engine.status())
          .then((s) => structuredClone(s.node));
      }
    });
    const op = await engine.update({ wait: true, requestedBy: 'test' });
    expect(op.state).toBe('succeeded');
    expect(seen).not.toBeNull();
    expect((await seen!).activeMachine).toBe('kube1');
    await engine.shutdown(0);
  });

  it('a refresh asked for while an older read runs is answered by a read that starts after it', async () => {
    const f = await createEngineFixture();
    const engine = createEngine(f);
    await engine.start();
    expect((await engine.status()).node.activeMachine).toBeNull();
    let open!: () => void;
    f.machines.inspectGate = new Promise<void>((r) => (open = r));
    // An older read is under way (held in inspect) when the node changes...
    const older = engine.refreshNode();
    await new Promise((r) => setTimeout(r, 10));
    await f.applied.write('kube1', structuredClone(BASE));
    await writeNodeState(f.stateDir, 'kube1', new Date(f.clock.now()));
    // ...so a refresh asked for now must not be answered by it.
    const newer = engine.refreshNode();
    open();
    f.machines.inspectGate = null;
    await older;
    await newer;
    expect((await engine.status()).node.activeMachine).toBe('kube1');
    await engine.shutdown(0);
  });
});
