import { describe, expect, it } from 'vitest';
import { EventStreamUnavailableError, type EventStream } from '../../../../src/cli/follow/event-stream.js';
import { followOperation, type FollowOptions } from '../../../../src/cli/follow/follow-operation.js';
import { FollowModel, type ModelChange } from '../../../../src/cli/follow/progress-model.js';
import type { Operation, StreamEvent } from '../../../../src/cli/types.js';
import { DaemonUnreachableError } from '../../../../src/rpc/http-transport.js';
import { createFakeClock } from '../../host/fake-clock.js';
import { makeOperation, phaseEvent } from './fixtures.js';

/** A stream that yields `events`, then ends (`end: true`) or stays open until closed. */
function fakeStream(events: StreamEvent[], end: boolean): EventStream & { closed: boolean } {
  let wake: (() => void) | null = null;
  const s = {
    closed: false,
    close() {
      s.closed = true;
      wake?.();
    },
    async *[Symbol.asyncIterator]() {
      for (const e of events) {
        if (s.closed) return;
        yield e;
      }
      if (end) return;
      while (!s.closed) await new Promise<void>((r) => (wake = r));
    },
  };
  return s;
}

function harness(
  o: Partial<FollowOptions> & { streams?: (() => Promise<EventStream>)[]; gets?: Operation[] },
) {
  const changes: ModelChange[] = [];
  const calls: string[] = [];
  const streams = [...(o.streams ?? [])];
  const gets = [...(o.gets ?? [])];
  const options: FollowOptions = {
    operation: makeOperation({ state: 'pending' }),
    model: new FollowModel(),
    onChange: (c) => changes.push(c),
    openStream: async () => {
      calls.push('open');
      const next = streams.shift();
      if (!next) throw new Error('no more streams');
      return next();
    },
    getOperation: async () => {
      calls.push('get');
      const next = gets.length > 1 ? gets.shift() : gets[0];
      if (!next) throw new Error('no operation');
      return next;
    },
    waitOperation: async () => {
      calls.push('wait');
      const next = gets.length > 1 ? gets.shift() : gets[0];
      if (!next) throw new Error('no operation');
      return next;
    },
    clock: createFakeClock(),
    ...o,
  };
  return { options, changes, calls };
}

const running = makeOperation({ state: 'running' });
const succeeded = makeOperation({ state: 'succeeded', finishedAt: '2026-03-01T12:00:09.000Z' });

describe('followOperation', () => {
  it('follows the stream to the final state, then asks operations.get for the final word', async () => {
    const stream = fakeStream(
      [
        { type: 'operation', operation: running },
        phaseEvent('preflight', 'running', 10),
        phaseEvent('preflight', 'succeeded', 20),
        { type: 'operation', operation: succeeded },
        phaseEvent('provision', 'running', 30),
      ],
      false,
    );
    const h = harness({ streams: [async () => stream], gets: [running, succeeded] });
    const outcome = await followOperation(h.options);
    expect(outcome).toEqual({ kind: 'ended', operation: succeeded });
    expect(h.calls).toEqual(['open', 'get', 'get']);
    expect(stream.closed).toBe(true);
    expect(h.changes.filter((c) => c.kind === 'phase')).toHaveLength(2);
    // Nothing after the final state was applied.
    expect(h.options.model.phases.find((p) => p.name === 'provision')?.state).toBe('pending');
  });

  it('the final event stands when the status read after it is older (it raced the end)', async () => {
    const stream = fakeStream([{ type: 'operation', operation: succeeded }], false);
    // The read after subscribing, then the one after the final event: both still say running.
    const h = harness({ streams: [async () => stream], gets: [running, running] });
    expect(await followOperation(h.options)).toEqual({ kind: 'ended', operation: succeeded });
    expect(h.calls).toEqual(['open', 'get', 'get']);
    expect(h.options.model.operation).toBe(succeeded);
    const states = h.changes.flatMap((c) => (c.kind === 'operation' ? [c.operation.state] : []));
    expect(states.at(-1)).toBe('succeeded');
  });

  it('the final event stands when the status read after it fails', async () => {
    let gets = 0;
    const h = harness({
      streams: [async () => fakeStream([{ type: 'operation', operation: succeeded }], false)],
      getOperation: async () => {
        gets += 1;
        if (gets > 1) throw new DaemonUnreachableError('/x.sock', 'other', 'closed without answering');
        return running;
      },
    });
    expect(await followOperation(h.options)).toEqual({ kind: 'ended', operation: succeeded });
  });

  it('an operation that is already final is not followed at all', async () => {
    const h = harness({ operation: succeeded });
    expect(await followOperation(h.options)).toEqual({ kind: 'ended', operation: succeeded });
    expect(h.calls).toEqual([]);
    expect(h.changes).toHaveLength(1);
  });

  it('the operation ended before the stream opened: the first operations.get says so', async () => {
    const stream = fakeStream([], false);
    const h = harness({ streams: [async () => stream], gets: [succeeded] });
    expect(await followOperation(h.options)).toEqual({ kind: 'ended', operation: succeeded });
    expect(stream.closed).toBe(true);
  });

  it('a stream the daemon closes early is opened again', async () => {
    const h = harness({
      streams: [
        async () => fakeStream([], true),
        async () => fakeStream([{ type: 'operation', operation: succeeded }], false),
      ],
      gets: [running, running, running, succeeded],
    });
    expect(await followOperation(h.options)).toEqual({ kind: 'ended', operation: succeeded });
    expect(h.calls).toEqual(['open', 'get', 'get', 'open', 'get', 'get']);
  });

  it('gives up when the stream keeps closing, naming the operation', async () => {
    const h = harness({
      streams: Array.from({ length: 10 }, () => async () => fakeStream([], true)),
      gets: [running],
      maxReconnects: 2,
    });
    await expect(followOperation(h.options)).rejects.toMatchObject({
      exitCode: 1,
      details: { code: 'STREAM_CLOSED', operation: 'op-1' },
    });
  });

  it('an agentd without /v1/events is polled with operations.wait', async () => {
    const h = harness({
      streams: [
        async () => {
          throw new EventStreamUnavailableError(404);
        },
      ],
      gets: [running, running, succeeded],
    });
    expect(await followOperation(h.options)).toEqual({ kind: 'ended', operation: succeeded });
    expect(h.calls).toEqual(['open', 'wait', 'wait', 'wait']);
  });

  it('an unreachable daemon is an error (the caller adds how to resume)', async () => {
    const h = harness({
      streams: [
        async () => {
          throw new DaemonUnreachableError('/x.sock', 'refused', 'connect ECONNREFUSED');
        },
      ],
    });
    await expect(followOperation(h.options)).rejects.toBeInstanceOf(DaemonUnreachableError);
  });

  it('times out with the operation as last seen, closing the stream', async () => {
    // A clock whose sleeps end only when the test says: the timeout passes once the stream is busy.
    const sleeps: { ms: number; end: () => void }[] = [];
    const clock = {
      now: () => 0,
      sleep: (ms: number) => new Promise<void>((resolve) => sleeps.push({ ms, end: resolve })),
    };
    const stream = fakeStream([{ type: 'operation', operation: running }], false);
    const h = harness({
      streams: [async () => stream],
      gets: [makeOperation({ state: 'pending' })],
      timeoutMs: 5000,
      clock,
      onChange: (c) => {
        if (c.kind === 'operation' && c.operation.state === 'running')
          sleeps.find((x) => x.ms === 5000)?.end();
      },
    });
    const outcome = await followOperation(h.options);
    expect(outcome).toEqual({ kind: 'timeout', operation: running });
    expect(stream.closed).toBe(true);
  });

  it('detaches on the signal (Ctrl-C), closing the stream', async () => {
    const stream = fakeStream([{ type: 'operation', operation: running }], false);
    const detach = new AbortController();
    const h = harness({
      streams: [async () => stream],
      gets: [running],
      signal: detach.signal,
      // Ctrl-C once the stream delivered something.
      onChange: (c) => {
        if (c.kind === 'operation' && c.operation.state === 'running') detach.abort();
      },
    });
    const outcome = await followOperation(h.options);
    expect(outcome.kind).toBe('detached');
    expect(outcome.operation.state).toBe('running');
    expect(stream.closed).toBe(true);
  });

  it('a signal aborted before following starts detaches at once', async () => {
    const h = harness({
      streams: [async () => fakeStream([], false)],
      gets: [running],
      signal: AbortSignal.abort(),
    });
    expect((await followOperation(h.options)).kind).toBe('detached');
  });
});
