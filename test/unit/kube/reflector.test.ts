// Why the fake API server (test/support/fake-kube): cut watches, compactions, 429/503 with Retry-After, a bookmark and an undecodable line, each at a chosen moment.
/**
 * The one reflector (src/kube/reflector.ts) against the fake API server, on the fake server's
 * test clock: every wait of the reflector is a `sleep` the clock records (and moves time by), so
 * a backoff or a Retry-After is read from `clock.sleeps`, never measured with a real timer.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiException, CoreV1Api } from '@kubernetes/client-node';
import { KubeUnavailableError, type AgentError } from '../../../src/errors.js';
import { BARE_TRANSPORT, makeApiClient, type KubeTransport } from '../../../src/kube/connection-pool.js';
import { createRateLimiter, type RateLimiter } from '../../../src/kube/rate-limit.js';
import {
  MAX_RETRY_AFTER_MS,
  createReflector,
  retryAfterMs,
  type Reflector,
} from '../../../src/kube/reflector.js';
import { WatchHttpError } from '../../../src/kube/watch-stream.js';
import { createTestClock, startFakeKube, type FakeKube, type TestClock } from '../../support/fake-kube.js';

const NS = 'default';

interface Seen {
  lists: string[][];
  events: string[];
  bookmarks: string[];
  failures: AgentError[];
  restarts: string[];
  decodeErrors: AgentError[];
}

/** Resolves once `check` holds (polled between I/O turns, at most ~10 s of real time). */
async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000 && !check(); i += 1) await new Promise((r) => setTimeout(r, 5));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describe('the reflector', () => {
  let kube: FakeKube;
  let clock: TestClock;
  let reflector: Reflector | null = null;

  beforeEach(async () => {
    kube = await startFakeKube();
    clock = createTestClock();
  });
  afterEach(async () => {
    await reflector?.stop();
    reflector = null;
    await kube.close();
  });

  /** A reflector on the ConfigMaps of NS; a ConfigMap named `bad*` does not decode. */
  function start(transport: KubeTransport = BARE_TRANSPORT): Seen {
    const kc = kube.kubeConfig();
    const core = makeApiClient(kc, transport, CoreV1Api);
    const seen: Seen = { lists: [], events: [], bookmarks: [], failures: [], restarts: [], decodeErrors: [] };
    reflector = createReflector<{ name: string; value: string | undefined }>({
      what: `ConfigMaps in ${NS}`,
      async list() {
        const list = await core.listNamespacedConfigMap({ namespace: NS });
        return {
          items: list.items,
          resourceVersion: list.metadata?.resourceVersion,
          target: { kc, transport, path: `/api/v1/namespaces/${NS}/configmaps`, query: {} },
        };
      },
      decode(object) {
        const o = object as { metadata: { name: string }; data?: Record<string, string> };
        if (o.metadata.name.startsWith('bad')) throw new Error(`${o.metadata.name} does not decode`);
        return { name: o.metadata.name, value: o.data?.v };
      },
      onList: (items) => seen.lists.push(items.map((i) => i.name)),
      onEvent: (type, item) => {
        if (item.name === 'boom' && !seen.events.includes('thrown')) {
          seen.events.push('thrown');
          throw new Error('the handler broke');
        }
        seen.events.push(`${type} ${item.name}=${item.value ?? ''}`);
      },
      onBookmark: (rv) => seen.bookmarks.push(rv),
      onFailure: (err) => seen.failures.push(err),
      onRestart: (reason) => seen.restarts.push(reason),
      onDecodeError: (err) => seen.decodeErrors.push(err),
      clock,
      // Equal jitter at its floor: each delay is half its nominal value, 250 ms doubling.
      backoff: { baseMs: 500, maxMs: 30_000, random: () => 0 },
    });
    void reflector.start();
    return seen;
  }

  const watches = () => kube.requests.filter((r) => r.verb === 'watch');
  const watchRv = (i: number): string | null =>
    new URLSearchParams(watches()[i]?.query ?? '').get('resourceVersion');

  it('lists, watches from the list’s version with bookmarks, and resumes from the last event or bookmark', async () => {
    kube.putConfigMap(NS, 'a', { v: '1' });
    const seen = start();
    await until(() => kube.openWatches === 1, 'the first watch');
    expect(seen.lists).toEqual([['a']]);
    const first = new URLSearchParams(watches()[0]?.query);
    expect(first.get('allowWatchBookmarks')).toBe('true');
    expect(first.get('resourceVersion')).toBe(kube.resourceVersion);

    kube.putConfigMap(NS, 'a', { v: '2' });
    await until(() => seen.events.length === 1, 'the event');
    const afterEvent = kube.resourceVersion;
    kube.cutWatches();
    await until(() => watches().length === 2 && kube.openWatches === 1, 'the second watch');
    // Resumed from the event's version, without a list.
    expect(watchRv(1)).toBe(afterEvent);
    expect(seen.lists).toHaveLength(1);
    expect(seen.restarts).toEqual(['closed']);

    // Writes elsewhere move the server's version on; a bookmark tells the watch.
    kube.addNode('n1');
    kube.addNode('n2');
    kube.sendBookmarks();
    await until(() => seen.bookmarks.length === 1, 'the bookmark');
    expect(seen.bookmarks[0]).toBe(kube.resourceVersion);
    expect(reflector?.resourceVersion).toBe(kube.resourceVersion);
    kube.cutWatches();
    await until(() => watches().length === 3 && kube.openWatches === 1, 'the third watch');
    expect(watchRv(2)).toBe(seen.bookmarks[0]);
    expect(seen.lists).toHaveLength(1);
    expect(seen.failures).toEqual([]);
    expect(clock.sleeps).toEqual([]);
  });

  it('lists again on a 410 (an ERROR event of code 410), at once, and watches from the new list', async () => {
    const seen = start();
    await until(() => kube.openWatches === 1, 'the first watch');
    kube.putConfigMap(NS, 'a', { v: '1' });
    await until(() => seen.events.length === 1, 'the event');
    // The watch breaks, and its version is compacted away meanwhile.
    kube.cutWatches({ abrupt: true });
    kube.putConfigMap(NS, 'b', { v: '1' });
    kube.compactHistory();
    await until(() => seen.lists.length === 2 && kube.openWatches === 1, 'the relist and its watch');
    expect(seen.lists[1]).toEqual(['a', 'b']);
    expect(seen.restarts).toEqual(['gone']);
    // The watch after the relist starts from the relist's version, not the compacted one.
    expect(watchRv(watches().length - 1)).toBe(kube.resourceVersion);
    // The broken watch was a failure (one backoff); the 410 itself waited nothing more.
    expect(clock.sleeps).toEqual([250]);
  });

  it('backs off instead of listing at once when the list’s own version is gone (a list that reads one object)', async () => {
    kube.putConfigMap(NS, 'a', { v: '1' });
    kube.putConfigMap(NS, 'b', { v: '1' });
    kube.compactHistory();
    const kc = kube.kubeConfig();
    const core = makeApiClient(kc, BARE_TRANSPORT, CoreV1Api);
    const failures: AgentError[] = [];
    let lists = 0;
    reflector = createReflector<unknown>({
      what: 'ConfigMap a',
      // The object's own version: older than the history the server keeps.
      async list() {
        lists += 1;
        const cm = await core.readNamespacedConfigMap({ namespace: NS, name: 'a' });
        return {
          items: [cm],
          resourceVersion: cm.metadata?.resourceVersion,
          target: {
            kc,
            transport: BARE_TRANSPORT,
            path: `/api/v1/namespaces/${NS}/configmaps`,
            query: { fieldSelector: 'metadata.name=a' },
          },
        };
      },
      decode: (o) => o,
      onList: () => undefined,
      onEvent: () => undefined,
      onFailure: (err) => failures.push(err),
      clock,
      backoff: { baseMs: 250, maxMs: 2000, random: () => 1 },
    });
    void reflector.start();
    // At least: the test clock's sleeps end at once, so the lists may go on before this looks.
    await until(() => lists >= 4, 'four lists');
    await reflector.stop();
    // Each list's watch was gone at once: a failure each time, with the backoff growing between.
    expect(failures.length).toBeGreaterThanOrEqual(3);
    expect(failures[0]?.message).toMatch(/the version the list gave \(\d+\) was gone at once/);
    expect(clock.sleeps.slice(0, 3)).toEqual([250, 500, 1000]);
  });

  it('grows its backoff on failures and resets it only once a watch is established', async () => {
    kube.failNext(2, { status: 500, match: { verb: 'watch' } });
    const seen = start();
    await until(() => kube.openWatches === 1, 'a watch that answers');
    expect(clock.sleeps).toEqual([250, 500]);
    // Answered 200, then closed before it delivered anything: not established, the streak goes on.
    kube.cutWatches();
    await until(() => kube.openWatches === 1 && clock.sleeps.length === 3, 'the next watch');
    expect(clock.sleeps).toEqual([250, 500, 1000]);
    expect(seen.failures.at(-1)?.data.reason).toBe('WatchClosed');
    expect(reflector?.failures).toBe(3);
    // An event: established, the streak ends; the next failure waits the first delay again.
    kube.putConfigMap(NS, 'a', { v: '1' });
    await until(() => seen.events.length === 1, 'the event');
    expect(reflector?.failures).toBe(0);
    kube.cutWatches({ abrupt: true });
    await until(() => clock.sleeps.length === 4 && kube.openWatches === 1, 'the watch after the break');
    expect(clock.sleeps).toEqual([250, 500, 1000, 250]);
    expect(seen.lists).toHaveLength(1);
  });

  it('counts a watch open 30 s as established, even without events', async () => {
    kube.failNext(1, { status: 500, match: { verb: 'watch' } });
    start();
    await until(() => kube.openWatches === 1, 'a watch that answers');
    expect(reflector?.failures).toBe(1);
    clock.advance(30_000);
    kube.cutWatches();
    await until(() => watches().length === 3 && kube.openWatches === 1, 'the resumed watch');
    expect(clock.sleeps).toEqual([250]);
    expect(reflector?.failures).toBe(0);
  });

  it('honours Retry-After of a 429 on the list and of a 503 on the watch', async () => {
    kube.failNext(1, { status: 429, retryAfterSeconds: 7, match: { verb: 'list' } });
    kube.failNext(1, { status: 503, retryAfterSeconds: 9, match: { verb: 'watch' } });
    const seen = start();
    await until(() => kube.openWatches === 1, 'the watch');
    // Longer than the backoff's 250 and 500 ms: the server's word wins.
    expect(clock.sleeps).toEqual([7000, 9000]);
    expect(seen.failures.map((f) => f.message)).toEqual([
      expect.stringContaining('429') as string,
      expect.stringContaining('503') as string,
    ]);
    // Without the header, the backoff.
    kube.failNext(1, { status: 503, match: { verb: 'watch' } });
    kube.cutWatches({ abrupt: true });
    await until(() => clock.sleeps.length === 4 && kube.openWatches === 1, 'the watch after two failures');
    expect(clock.sleeps.slice(2)).toEqual([1000, 2000]);
  });

  it('reads Retry-After as seconds or an HTTP date, of a 429 or 503 only, capped', () => {
    const now = Date.UTC(2026, 0, 1);
    const api = (code: number, value: string) =>
      new ApiException(code, 'refused', '', { 'retry-after': value });
    expect(retryAfterMs(api(503, '3'), now)).toBe(3000);
    expect(retryAfterMs(api(429, new Date(now + 5000).toUTCString()), now)).toBe(5000);
    expect(retryAfterMs(new WatchHttpError(429, 'slow down', '2', 'TooManyRequests'), now)).toBe(2000);
    // Found in the cause chain of the AgentError a client error became.
    expect(retryAfterMs(new KubeUnavailableError('list x', { cause: api(503, '4') }), now)).toBe(4000);
    expect(retryAfterMs(api(503, '100000'), now)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterMs(api(500, '3'), now)).toBeUndefined();
    expect(retryAfterMs(api(503, 'soon'), now)).toBeUndefined();
    expect(retryAfterMs(new Error('no status'), now)).toBeUndefined();
  });

  it('waits for the client-side rate limit before the list and before every watch', async () => {
    const limiter = createRateLimiter({ qps: 1, burst: 1, clock });
    let acquired = 0;
    const counting: RateLimiter = {
      acquire: async (signal) => {
        acquired += 1;
        await limiter.acquire(signal);
      },
    };
    start({ limiter: counting, pool: null });
    await until(() => kube.openWatches === 1, 'the watch');
    // The list took the one token; the watch waited a second for the next, on the clock.
    expect(acquired).toBe(2);
    expect(clock.sleeps).toEqual([1000]);
    expect(kube.countRequests({ verb: 'list' })).toBe(1);
  });

  it('counts events that do not decode, and goes on watching past them', async () => {
    const seen = start();
    await until(() => kube.openWatches === 1, 'the watch');
    kube.sendWatchLine('{"type": "ADDED", "object": ');
    kube.putConfigMap(NS, 'bad-one', { v: 'x' });
    kube.sendWatchLine('{"object": {}}');
    kube.putConfigMap(NS, 'good', { v: 'y' });
    await until(() => seen.events.length === 1, 'the good event');
    expect(seen.events).toEqual(['ADDED good=y']);
    expect(reflector?.decodeErrors).toBe(3);
    expect(seen.decodeErrors.map((e) => e.data.reason)).toEqual(['Decode', 'Decode', 'Decode']);
    expect(seen.decodeErrors[1]?.message).toContain('bad-one');
    expect(kube.countRequests({ verb: 'watch' })).toBe(1);
    expect(reflector?.resourceVersion).toBe(kube.resourceVersion);
  });

  it('a handler that throws ends the watch as a failure, and the event comes again after the backoff', async () => {
    const seen = start();
    await until(() => kube.openWatches === 1, 'the watch');
    kube.putConfigMap(NS, 'boom', { v: '1' });
    await until(() => seen.events.includes('ADDED boom=1'), 'the event, again');
    expect(seen.events).toEqual(['thrown', 'ADDED boom=1']);
    expect(seen.failures.map((f) => [f.code, f.message])).toEqual([
      ['INTERNAL', expect.stringContaining('the handler broke') as string],
    ]);
    expect(clock.sleeps).toEqual([250]);
    expect(seen.lists).toHaveLength(1);
  });

  it('stops: the open watch is closed and no request follows', async () => {
    start();
    await until(() => kube.openWatches === 1, 'the watch');
    await reflector?.stop();
    await until(() => kube.openWatches === 0, 'the watch to close');
    const requests = kube.requests.length;
    kube.putConfigMap(NS, 'a', { v: '1' });
    await reflector?.stop();
    expect(kube.requests.length).toBe(requests);
  });
});
