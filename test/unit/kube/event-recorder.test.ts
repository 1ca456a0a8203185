/**
 * The Kubernetes event recorder (src/kube/event-recorder.ts) on an injected clock and a sink that
 * records what it is asked to write: aggregation into series, the per-object token bucket, the
 * bounded queue, and failures that never reach the caller.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  EVENT_SERIES_WINDOW_MS,
  createEventRecorder,
  type EventInput,
  type EventRecorderOptions,
  type EventSink,
  type KubeEventBody,
} from '../../../src/kube/event-recorder.js';
import { createManualClock } from '../../support/manual-clock.js';

const machine = { apiVersion: 'unbounded-cloud.io/v1alpha3', kind: 'Machine', name: 'node-1' };
const event = (note: string, regarding = machine): EventInput => ({
  regarding,
  type: 'Warning',
  reason: 'RolledBack',
  action: 'Update',
  note,
});

interface Write {
  verb: 'create' | 'patch';
  name: string;
  body?: KubeEventBody;
  series?: KubeEventBody['series'];
}

function fakeSink(o: { hang?: boolean; fail?: boolean; gone?: boolean } = {}) {
  const writes: Write[] = [];
  const never = new Promise<never>(() => undefined);
  const sink: EventSink = {
    async create(body) {
      writes.push({ verb: 'create', name: body.metadata.name, body });
      if (o.hang) await never;
      if (o.fail) throw new Error('connect ECONNREFUSED 127.0.0.1:1');
    },
    async patchSeries(_ns, name, series) {
      writes.push({ verb: 'patch', name, series });
      if (o.fail) throw new Error('connect ECONNREFUSED 127.0.0.1:1');
      return o.gone ? 'gone' : 'patched';
    },
  };
  return { sink, writes };
}

function recorder(sink: EventSink, o: Partial<EventRecorderOptions> = {}) {
  const clock = createManualClock();
  const written: string[] = [];
  const dropped: string[] = [];
  const r = createEventRecorder({
    sink: () => sink,
    instance: () => 'node-1',
    clock,
    logger: pino({ level: 'silent' }),
    onWritten: (result) => written.push(result),
    onDropped: (reason) => dropped.push(reason),
    ...o,
  });
  return { r, clock, written, dropped };
}

describe('the event recorder', () => {
  it('writes an events.k8s.io/v1 Event naming the object, agentd and the node', async () => {
    const { sink, writes } = fakeSink();
    const { r, clock } = recorder(sink);
    r.record(event('update op-1 rolled back'));
    await r.idle();
    expect(writes).toHaveLength(1);
    expect(writes[0]?.body).toEqual({
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: expect.stringMatching(/^node-1\.[0-9a-f]+$/), namespace: 'default' },
      eventTime: new Date(clock.now()).toISOString().replace('Z', '000Z'),
      reportingController: 'agentd',
      reportingInstance: 'node-1',
      regarding: machine,
      type: 'Warning',
      reason: 'RolledBack',
      action: 'Update',
      note: 'update op-1 rolled back',
    });
  });

  it('aggregates a repeated event into the series of the first: one object, its count raised', async () => {
    const { sink, writes } = fakeSink();
    const { r, clock, written } = recorder(sink);
    r.record(event('same'));
    await r.idle();
    await clock.advance(1000);
    r.record(event('same'));
    await r.idle();
    await clock.advance(1000);
    r.record(event('same'));
    await r.idle();
    r.record(event('another note'));
    await r.idle();
    const first = writes[0]?.name;
    expect(writes.map((w) => [w.verb, w.name === first, w.series?.count])).toEqual([
      ['create', true, undefined],
      ['patch', true, 2],
      ['patch', true, 3],
      ['create', false, undefined],
    ]);
    expect(writes[2]?.series?.lastObservedTime).toBe(
      new Date(clock.now()).toISOString().replace('Z', '000Z'),
    );
    expect(written).toEqual(['created', 'series_updated', 'series_updated', 'created']);
  });

  it('starts a new Event once the series window has passed since the event was last observed', async () => {
    const { sink, writes } = fakeSink();
    const { r, clock } = recorder(sink);
    r.record(event('same'));
    await r.idle();
    await clock.advance(EVENT_SERIES_WINDOW_MS);
    r.record(event('same')); // just within: a repeat
    await r.idle();
    await clock.advance(EVENT_SERIES_WINDOW_MS + 1);
    r.record(event('same'));
    await r.idle();
    expect(writes.map((w) => w.verb)).toEqual(['create', 'patch', 'create']);
    expect(writes[2]?.body?.series).toBeUndefined();
  });

  it('coalesces repeats that arrive while a write is queued into the one write', async () => {
    const { sink, writes } = fakeSink();
    const { r } = recorder(sink);
    r.record(event('other')); // in flight: the next ones queue behind it
    r.record(event('same'));
    r.record(event('same'));
    r.record(event('same'));
    await r.idle();
    expect(writes.map((w) => [w.verb, w.body?.note, w.body?.series?.count])).toEqual([
      ['create', 'other', undefined],
      ['create', 'same', 3],
    ]);
    // A repeat of an Event whose create is under way is patched once that create succeeded.
    r.record(event('same'));
    await r.idle();
    expect(writes[2]).toMatchObject({ verb: 'patch', name: writes[1]?.name, series: { count: 4 } });
  });

  it('creates the Event again when its series is patched after it was deleted', async () => {
    const { sink, writes } = fakeSink({ gone: true });
    const { r, written } = recorder(sink);
    r.record(event('same'));
    await r.idle();
    r.record(event('same'));
    await r.idle();
    expect(writes.map((w) => w.verb)).toEqual(['create', 'patch', 'create']);
    expect(writes[2]?.body?.series).toMatchObject({ count: 2 });
    expect(writes[2]?.name).not.toBe(writes[0]?.name);
    expect(written).toEqual(['created', 'created']);
  });

  it('rate-limits each object with a token bucket (bursts of 25, then one per 5 minutes)', async () => {
    const { sink, writes } = fakeSink();
    const { r, clock, dropped } = recorder(sink);
    for (let i = 0; i < 30; i++) r.record(event(`note ${i}`));
    r.record(event('another object', { ...machine, name: 'node-2' }));
    await r.idle();
    expect(writes).toHaveLength(26);
    expect(dropped).toEqual(Array(5).fill('rate_limited'));
    await clock.advance(5 * 60_000 - 1);
    r.record(event('too soon'));
    await clock.advance(1);
    r.record(event('one token back'));
    await r.idle();
    expect(writes.map((w) => w.body?.note).slice(26)).toEqual(['one token back']);
    expect(dropped).toHaveLength(6);
  });

  it('drops and counts rather than grow its queue while the API server does not answer', async () => {
    const { sink, writes } = fakeSink({ hang: true });
    let pending = 0;
    const { r, dropped } = recorder(sink, { queueSize: 10, burst: 1000, onPending: (p) => (pending = p) });
    for (let i = 0; i < 50; i++) r.record(event(`note ${i}`));
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toHaveLength(1); // the one in flight
    expect(r.queued).toBe(10);
    expect(pending).toBe(11);
    expect(dropped).toEqual(Array(39).fill('queue_full'));
  });

  it('counts a failed write, never throws to the caller, and writes the next event', async () => {
    const failing = fakeSink({ fail: true });
    let sink: EventSink = failing.sink;
    const { r, written } = recorder(failing.sink, { sink: () => sink });
    expect(() => r.record(event('first'))).not.toThrow();
    await r.idle();
    const working = fakeSink();
    sink = working.sink;
    r.record(event('second'));
    await r.idle();
    expect(written).toEqual(['failed', 'created']);
    expect(working.writes.map((w) => w.body?.note)).toEqual(['second']);
  });

  it('completes the reference with the sink before the first write, and clips a long note', async () => {
    const { sink, writes } = fakeSink();
    sink.resolve = (ref) => Promise.resolve({ ...ref, uid: 'uid-1' });
    const { r } = recorder(sink);
    r.record(event('x'.repeat(2000)));
    await r.idle();
    expect(writes[0]?.body?.regarding).toEqual({ ...machine, uid: 'uid-1' });
    expect(writes[0]?.body?.note).toHaveLength(1024);
  });

  it('writes nothing after stop, and drops what was queued', async () => {
    const { sink, writes } = fakeSink({ hang: true });
    const { r } = recorder(sink);
    r.record(event('a'));
    r.record(event('b'));
    r.stop();
    r.record(event('c'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes.map((w) => w.body?.note)).toEqual(['a']);
    expect(r.queued).toBe(0);
  });
});
