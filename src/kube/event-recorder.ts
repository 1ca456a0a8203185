/**
 * Kubernetes Events (`events.k8s.io/v1`) about this node, recorded the way client-go's event
 * recorder (k8s.io/client-go/tools/events) does, and never on the operation's path:
 *
 * - **Aggregation.** An event isomorphic to one recorded within the series window (the same
 *   regarding object, reason, action, note and type, as client-go's `getKey`) does not add an
 *   object: the existing Event's `series.count` and `series.lastObservedTime` are patched. A
 *   series ends 6 minutes (client-go's `finishTime`) after it was last observed; the same event
 *   after that is a new Event. Unlike client-go, which writes a series' count only every 30
 *   minutes after the second occurrence, each repeat patches the count at once (a repeat that
 *   arrives while the previous patch still waits in the queue only raises the count it carries).
 * - **Rate limit.** A token bucket per regarding object, as client-go's spam filter
 *   (`EventSourceObjectSpamFilter`: bursts of 25, then one per 5 minutes): an event over it is
 *   dropped and counted. The writes themselves pass the client's rate limit like every request.
 * - **A bounded queue.** `record` only enqueues (never awaits, never throws); one writer sends
 *   the queue in order. A full queue drops the new event and counts it rather than grow.
 * - **Failures** are logged at debug and counted; an Event that cannot be written is dropped (a
 *   patch of a series whose Event is gone creates it again, as client-go does).
 *
 * Machine and Node are cluster-scoped, so their Events live in namespace `default`, where
 * client-go puts the Events of cluster-scoped objects.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { Clock } from '../host/types.js';

/** client-go's `finishTime`: a series not observed for this long is over. */
export const EVENT_SERIES_WINDOW_MS = 6 * 60_000;
/** client-go's spam filter: `defaultSpamBurst` and one token per `defaultSpamQPS` (1/300 s). */
export const EVENT_BURST = 25;
export const EVENT_REFILL_MS = 5 * 60_000;
/** Events waiting to be written at most (client-go's broadcaster queues 1000 for all objects). */
export const EVENT_QUEUE_SIZE = 100;
/** Isomorphic events remembered at most (the oldest forgotten first). */
export const EVENT_CACHE_SIZE = 256;
/** The API server's limit of `note` (bytes; agentd's notes are clipped to this many characters). */
export const EVENT_NOTE_MAX = 1024;
/** Where the Events of cluster-scoped objects (Machine, Node) are written. */
export const CLUSTER_SCOPED_EVENT_NAMESPACE = 'default';
export const REPORTING_CONTROLLER = 'agentd';

/** The object an Event is about (`regarding`). */
export interface EventObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid?: string;
  namespace?: string;
}

/** What the daemon records; the recorder adds the rest (time, reporting fields, series). */
export interface EventInput {
  regarding: EventObjectRef;
  type: 'Normal' | 'Warning';
  /** CamelCase, what happened: `RolledBack`, `UpdateStarted`… (at most 128 characters). */
  reason: string;
  /** CamelCase, what agentd did: `Update`, `Drain`… (at most 128 characters). */
  action: string;
  note: string;
}

/** An `events.k8s.io/v1` Event as agentd writes it. */
export interface KubeEventBody {
  apiVersion: 'events.k8s.io/v1';
  kind: 'Event';
  metadata: { name: string; namespace: string };
  eventTime: string;
  reportingController: string;
  reportingInstance: string;
  regarding: EventObjectRef;
  type: 'Normal' | 'Warning';
  reason: string;
  action: string;
  note: string;
  series?: { count: number; lastObservedTime: string };
}

/** Where Events go: the API server (createEventSink in runtime), a fake in tests. */
export interface EventSink {
  /**
   * Complete a regarding reference before its first write (the object's uid, the Node the
   * Machine names), off the caller's path; the reference as given when absent.
   */
  resolve?(ref: EventObjectRef): Promise<EventObjectRef>;
  create(event: KubeEventBody): Promise<void>;
  /** Merge-patch an Event's series; `gone` when the Event no longer exists. */
  patchSeries(
    namespace: string,
    name: string,
    series: NonNullable<KubeEventBody['series']>,
  ): Promise<'patched' | 'gone'>;
}

export type EventDropReason = 'queue_full' | 'rate_limited';
export type EventWriteResult = 'created' | 'series_updated' | 'failed';

export interface EventRecorderOptions {
  /** The sink of the moment; null: no Kubernetes (the event is dropped, uncounted: nothing to write to). */
  sink: () => EventSink | null;
  /** `reportingInstance`: the node's name. */
  instance: () => string;
  clock: Clock;
  logger: Logger;
  onWritten?: (result: EventWriteResult) => void;
  onDropped?: (reason: EventDropReason) => void;
  /** Told the number of Events queued or being written, whenever it changes. */
  onPending?: (pending: number) => void;
  queueSize?: number;
  burst?: number;
  refillMs?: number;
  seriesWindowMs?: number;
}

export interface EventRecorder {
  /** Enqueue an Event; returns at once and never throws. */
  record(event: EventInput): void;
  /** Resolves once the queue is empty and no write is under way (tests, shutdown). */
  idle(): Promise<void>;
  /** Events waiting to be written. */
  readonly queued: number;
  /** Stop: what is queued is dropped, nothing more is written. */
  stop(): void;
}

/** Kubernetes MicroTime: RFC 3339 with microseconds. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

interface Cached {
  body: KubeEventBody;
  lastObservedMs: number;
  /** A write of this Event (its create or a series patch) waits in the queue. */
  pending: boolean;
  /** The Event exists on the server (its create succeeded). */
  created: boolean;
  /** `regarding` went through the sink's `resolve`. */
  resolved: boolean;
}

interface Bucket {
  tokens: number;
  last: number;
}

const keyOf = (e: EventInput, instance: string): string =>
  JSON.stringify([
    e.regarding.apiVersion,
    e.regarding.kind,
    e.regarding.namespace ?? '',
    e.regarding.name,
    e.regarding.uid ?? '',
    e.type,
    e.reason,
    e.action,
    e.note,
    instance,
  ]);

const clipTo = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max - 1)}…`;

/** A DNS-subdomain name for a new Event: the object's name and a unique suffix, as client-go does. */
function eventName(object: string, nowMs: number): string {
  const suffix = `${nowMs.toString(16)}${randomBytes(4).toString('hex')}`;
  return `${object.slice(0, 253 - suffix.length - 1)}.${suffix}`;
}

export function createEventRecorder(o: EventRecorderOptions): EventRecorder {
  const { clock, logger } = o;
  const queueSize = o.queueSize ?? EVENT_QUEUE_SIZE;
  const burst = o.burst ?? EVENT_BURST;
  const refillMs = o.refillMs ?? EVENT_REFILL_MS;
  const windowMs = o.seriesWindowMs ?? EVENT_SERIES_WINDOW_MS;
  const cache = new Map<string, Cached>();
  const buckets = new Map<string, Bucket>();
  const queue: Cached[] = [];
  let writing: Promise<void> | null = null;
  let inFlight = 0;
  let stopped = false;
  const pendingChanged = (): void => o.onPending?.(queue.length + inFlight);

  /** Take a token of the object's bucket; false when it is empty (the event is dropped). */
  function take(object: string, now: number): boolean {
    let b = buckets.get(object);
    if (b === undefined) {
      b = { tokens: burst, last: now };
      buckets.set(object, b);
    }
    b.tokens = Math.min(burst, b.tokens + (now - b.last) / refillMs);
    b.last = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  function remember(key: string, entry: Cached): void {
    cache.delete(key);
    cache.set(key, entry);
    for (const [k, v] of cache) {
      if (cache.size <= EVENT_CACHE_SIZE) break;
      if (!v.pending) cache.delete(k);
    }
  }

  async function write(entry: Cached, sink: EventSink): Promise<void> {
    const { body } = entry;
    const series = body.series;
    if (entry.created && series !== undefined) {
      const patched = await sink.patchSeries(body.metadata.namespace, body.metadata.name, { ...series });
      if (patched === 'patched') {
        o.onWritten?.('series_updated');
        return;
      }
      // The Event is gone (its TTL ran out, someone deleted it): create it again with its series.
      entry.created = false;
      body.metadata.name = eventName(body.regarding.name, clock.now());
    }
    if (!entry.resolved && sink.resolve !== undefined) {
      body.regarding = await sink.resolve(body.regarding);
      entry.resolved = true;
    }
    await sink.create(structuredClone(body));
    entry.created = true;
    o.onWritten?.('created');
  }

  async function drain(): Promise<void> {
    for (let entry = queue.shift(); entry !== undefined && !stopped; entry = queue.shift()) {
      entry.pending = false;
      const sink = o.sink();
      if (sink === null) {
        pendingChanged();
        continue;
      }
      inFlight = 1;
      pendingChanged();
      try {
        await write(entry, sink);
      } catch (err) {
        o.onWritten?.('failed');
        logger.debug(
          { err: describeError(err), reason: entry.body.reason, regarding: entry.body.regarding.name },
          'a Kubernetes Event could not be written; it is dropped',
        );
      } finally {
        inFlight = 0;
        pendingChanged();
      }
    }
  }

  function kick(): void {
    writing ??= drain().finally(() => {
      writing = null;
      if (queue.length > 0 && !stopped) kick();
    });
  }

  function enqueue(entry: Cached): boolean {
    if (entry.pending) return true; // its queued write carries the new count
    if (queue.length >= queueSize) {
      o.onDropped?.('queue_full');
      return false;
    }
    entry.pending = true;
    queue.push(entry);
    pendingChanged();
    kick();
    return true;
  }

  function record(e: EventInput): void {
    if (stopped) return;
    try {
      const now = clock.now();
      const instance = o.instance();
      const key = keyOf(e, instance);
      const object = JSON.stringify([e.regarding.kind, e.regarding.namespace ?? '', e.regarding.name]);
      if (!take(object, now)) {
        o.onDropped?.('rate_limited');
        return;
      }
      const previous = cache.get(key);
      if (previous !== undefined && now - previous.lastObservedMs <= windowMs) {
        previous.lastObservedMs = now;
        const count = (previous.body.series?.count ?? 1) + 1;
        previous.body.series = { count, lastObservedTime: microTime(now) };
        remember(key, previous);
        enqueue(previous);
        return;
      }
      const namespace = e.regarding.namespace ?? CLUSTER_SCOPED_EVENT_NAMESPACE;
      const entry: Cached = {
        body: {
          apiVersion: 'events.k8s.io/v1',
          kind: 'Event',
          metadata: { name: eventName(e.regarding.name, now), namespace },
          eventTime: microTime(now),
          reportingController: REPORTING_CONTROLLER,
          reportingInstance: clipTo(instance, 128),
          regarding: { ...e.regarding },
          type: e.type,
          reason: clipTo(e.reason, 128),
          action: clipTo(e.action, 128),
          note: clipTo(e.note, EVENT_NOTE_MAX),
        },
        lastObservedMs: now,
        pending: false,
        created: false,
        resolved: false,
      };
      if (enqueue(entry)) remember(key, entry);
    } catch (err) {
      // Recording is best effort: nothing of it may reach the caller.
      logger.debug({ err: describeError(err) }, 'a Kubernetes Event could not be recorded');
    }
  }

  return {
    record,
    async idle() {
      while (writing !== null) await writing;
    },
    get queued() {
      return queue.length;
    },
    stop() {
      stopped = true;
      for (const entry of queue) entry.pending = false;
      queue.length = 0;
      pendingChanged();
    },
  };
}
