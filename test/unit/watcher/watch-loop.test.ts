import { describe, expect, it } from 'vitest';
import type { AgentError } from '../../../src/errors.js';
import { KubeUnavailableError, PreconditionFailedError } from '../../../src/errors.js';
import { machineSchema } from '../../../src/kube/schemas.js';
import type { Machine } from '../../../src/kube/schemas.js';
import type { MachineWatchEvent, WatchMachine } from '../../../src/kube/watch.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { runWatchLoop } from '../../../src/watcher/watch-loop.js';
import { WatcherState } from '../../../src/watcher/watcher-state.js';
import { createTestClock } from '../../support/fake-kube.js';
import { silentLogger } from './rpc-stub.js';

const NAME = 'w1';

function machine(rv: string): Machine {
  return machineSchema.parse({ metadata: { name: NAME, uid: 'u', resourceVersion: rv, generation: 1 } });
}

interface Session {
  resourceVersion: string | undefined;
  emit: (e: MachineWatchEvent) => void;
  end: (err: AgentError | null) => void;
  aborted: boolean;
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !check(); i += 1) await new Promise((r) => setImmediate(r));
  expect(check()).toBe(true);
}

const expired = (): KubeUnavailableError =>
  new KubeUnavailableError('watch Machine w1: too old', { data: { reason: 'Expired', status: 410 } });

function harness(options: { ensureFailures?: AgentError[]; connectFailures?: AgentError[] } = {}) {
  const clock = createTestClock();
  const metrics = createMetrics({ version: 't', collectDefaults: false });
  const state = new WatcherState(NAME, clock);
  const sessions: Session[] = [];
  const connectFailures = [...(options.connectFailures ?? [])];
  const ensureFailures = [...(options.ensureFailures ?? [])];
  let listRv = 10;
  let lists = 0;
  let changes = 0;
  let ensures = 0;
  const watchMachine: WatchMachine = async (_name, resourceVersion, onEvent, onDone) => {
    const fail = connectFailures.shift();
    if (fail) throw fail;
    const s: Session = { resourceVersion, emit: onEvent, end: onDone, aborted: false };
    sessions.push(s);
    return {
      abort() {
        s.aborted = true;
      },
    };
  };
  const controller = new AbortController();
  const done = runWatchLoop(
    {
      name: NAME,
      machines: {
        getMachine: async () => {
          lists += 1;
          return machine(String(listRv));
        },
      },
      watchMachine,
      ensureMachine: async () => {
        ensures += 1;
        const fail = ensureFailures.shift();
        if (fail) throw fail;
        return { created: false };
      },
      onChange: () => (changes += 1),
      clock,
      backoff: { baseMs: 100, maxMs: 1000, random: () => 1 },
      logger: silentLogger,
      metrics,
      state,
    },
    controller.signal,
  );
  const restarts = async (reason: string): Promise<number> =>
    (await metrics.watchRestarts.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
  return {
    clock,
    metrics,
    state,
    sessions,
    done,
    stop: () => controller.abort(),
    restarts,
    setListRv: (rv: number) => (listRv = rv),
    lists: () => lists,
    changes: () => changes,
    ensures: () => ensures,
  };
}

describe('runWatchLoop', () => {
  it('lists (a first reconcile), watches from there, and resumes a closed stream from the last version', async () => {
    const h = harness();
    await until(() => h.sessions.length === 1);
    expect(h.sessions[0]?.resourceVersion).toBe('10');
    expect(h.changes()).toBe(1);
    expect(h.state.connected).toBe(true);

    h.sessions[0]?.emit({ type: 'MODIFIED', machine: machine('11'), resourceVersion: '11' });
    h.sessions[0]?.emit({ type: 'BOOKMARK', resourceVersion: '15' });
    expect(h.changes()).toBe(2);
    h.sessions[0]?.end(null);
    await until(() => h.sessions.length === 2);
    expect(h.sessions[1]?.resourceVersion).toBe('15');
    expect(h.lists()).toBe(1);
    expect(h.clock.sleeps).toEqual([]);
    expect(await h.restarts('closed')).toBe(1);
    expect(h.state.snapshot()).toMatchObject({ connected: true, lastEventAt: expect.any(String) });
    h.stop();
    await h.done;
    expect(h.sessions[1]?.aborted).toBe(true);
    expect(h.state.connected).toBe(false);
  });

  it('relists after a 410 and watches from the new version', async () => {
    const h = harness();
    await until(() => h.sessions.length === 1);
    h.setListRv(42);
    h.sessions[0]?.end(expired());
    await until(() => h.sessions.length === 2);
    expect(h.lists()).toBe(2);
    expect(h.changes()).toBe(2);
    expect(h.sessions[1]?.resourceVersion).toBe('42');
    expect(await h.restarts('gone')).toBe(1);
    expect(h.clock.sleeps).toEqual([]);
    h.stop();
    await h.done;
  });

  it('restarts after errors with capped, growing backoff, reset only once a watch is established', async () => {
    const down = new KubeUnavailableError('watch Machine w1: cannot reach the API server', { data: {} });
    const h = harness({ connectFailures: [down, down, down] });
    await until(() => h.sessions.length === 1);
    expect(h.clock.sleeps).toEqual([100, 200, 400]);
    expect(await h.restarts('error')).toBe(3);
    expect(h.state.snapshot().lastError).toBeNull();
    // Connected, but nothing arrived before it broke: still the same failure streak.
    h.sessions[0]?.end(new KubeUnavailableError('stream reset', { data: {} }));
    await until(() => h.sessions.length === 2);
    expect(h.clock.sleeps).toEqual([100, 200, 400, 800]);
    expect(h.sessions[1]?.resourceVersion).toBe('10');
    // A bookmark shows the watch works: the next failure starts from the base delay again.
    h.sessions[1]?.emit({ type: 'BOOKMARK', resourceVersion: '12' });
    h.sessions[1]?.end(new KubeUnavailableError('stream reset', { data: {} }));
    await until(() => h.sessions.length === 3);
    expect(h.clock.sleeps).toEqual([100, 200, 400, 800, 100]);
    h.stop();
    await h.done;
  });

  it('counts a watch that stayed open a while as established even without events', async () => {
    const down = new KubeUnavailableError('watch Machine w1: cannot reach the API server', { data: {} });
    const h = harness({ connectFailures: [down, down] });
    await until(() => h.sessions.length === 1);
    expect(h.clock.sleeps).toEqual([100, 200]);
    h.clock.advance(30_000);
    h.sessions[0]?.end(new KubeUnavailableError('stream reset', { data: {} }));
    await until(() => h.sessions.length === 2);
    expect(h.clock.sleeps).toEqual([100, 200, 100]);
    h.stop();
    await h.done;
  });

  it('backs off when the server closes a watch before it delivered anything', async () => {
    const h = harness();
    for (let i = 1; i <= 3; i += 1) {
      await until(() => h.sessions.length === i);
      h.sessions[i - 1]?.end(null);
    }
    await until(() => h.sessions.length === 4);
    expect(h.clock.sleeps).toEqual([100, 200, 400]);
    expect(await h.restarts('error')).toBe(3);
    h.stop();
    await h.done;
  });

  it('takes a watch that ended before its handle came as a failure, with the API error', async () => {
    // client-node reports a non-200 answer through onDone before watch() resolves.
    const clock = createTestClock();
    const state = new WatcherState(NAME, clock);
    const controller = new AbortController();
    let opens = 0;
    const done = runWatchLoop(
      {
        name: NAME,
        machines: { getMachine: async () => machine('1') },
        watchMachine: async (_n, _rv, _onEvent, onDone) => {
          opens += 1;
          onDone(new KubeUnavailableError('watch Machine w1: the API server answered 500', { data: {} }));
          return { abort: () => undefined };
        },
        ensureMachine: async () => ({ created: false }),
        onChange: () => undefined,
        clock,
        backoff: { baseMs: 100, maxMs: 1000, random: () => 1 },
        logger: silentLogger,
        metrics: createMetrics({ version: 't', collectDefaults: false }),
        state,
      },
      controller.signal,
    );
    await until(() => clock.sleeps.length >= 5);
    expect(clock.sleeps.slice(0, 5)).toEqual([100, 200, 400, 800, 1000]);
    expect(state.snapshot().lastError).toContain('answered 500');
    controller.abort();
    await done;
    expect(opens).toBeGreaterThanOrEqual(5);
  });

  it('registers the node again when its Machine is deleted', async () => {
    const h = harness();
    await until(() => h.sessions.length === 1);
    expect(h.ensures()).toBe(1);
    h.sessions[0]?.emit({ type: 'DELETED', machine: machine('12'), resourceVersion: '12' });
    await until(() => h.sessions.length === 2);
    expect(h.sessions[0]?.aborted).toBe(true);
    expect(h.ensures()).toBe(2);
    expect(h.lists()).toBe(2);
    h.stop();
    await h.done;
  });

  it('counts decode errors instead of swallowing them, and does not reconcile on them', async () => {
    const h = harness();
    await until(() => h.sessions.length === 1);
    const error = new KubeUnavailableError('Machine w1: spec.operations.repaveCounter: too small', {
      data: {},
    });
    h.sessions[0]?.emit({ type: 'DECODE_ERROR', error, raw: {} });
    expect((await h.metrics.watchDecodeErrors.get()).values[0]?.value).toBe(1);
    expect(h.state.snapshot()).toMatchObject({
      lastErrorCode: 'KUBE_UNAVAILABLE',
      lastError: expect.stringContaining('too small'),
    });
    expect(h.changes()).toBe(1);
    h.stop();
    await h.done;
  });

  it('retries self-registration until it succeeds, reporting why it failed', async () => {
    const h = harness({
      ensureFailures: [
        new PreconditionFailedError('Machine w1 does not exist and this node has not joined yet'),
      ],
    });
    await until(() => h.sessions.length === 1);
    expect(h.clock.sleeps).toEqual([100]);
    h.stop();
    await h.done;
  });

  it('stops while connecting without waiting for the server', async () => {
    const clock = createTestClock();
    const controller = new AbortController();
    let aborted = false;
    let release: () => void = () => undefined;
    const done = runWatchLoop(
      {
        name: NAME,
        machines: { getMachine: async () => machine('1') },
        watchMachine: () =>
          new Promise((resolve) => {
            release = () => resolve({ abort: () => (aborted = true) });
          }),
        ensureMachine: async () => ({ created: false }),
        onChange: () => undefined,
        clock,
        backoff: { baseMs: 100, maxMs: 1000 },
        logger: silentLogger,
        metrics: createMetrics({ version: 't', collectDefaults: false }),
        state: new WatcherState(NAME, clock),
      },
      controller.signal,
    );
    await new Promise((r) => setImmediate(r));
    controller.abort();
    await done;
    release();
    await until(() => aborted);
  });
});
