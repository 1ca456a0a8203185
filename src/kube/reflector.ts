/**
 * The one list/watch loop of agentd, after client-go's Reflector (tools/cache/reflector.go).
 * The Machine watcher, the fleet's policy and slot watches, and the watch of this node's cordon
 * each run one; none restarts a watch itself.
 *
 * - **List, then watch** from the list's resourceVersion, with `allowWatchBookmarks`. The
 *   resourceVersion of every event and bookmark is kept: a watch that ends, or breaks, resumes
 *   from there without a list.
 * - **410 Gone** (an HTTP 410, or an ERROR event of code 410: the version was compacted away)
 *   lists again at once: what happened since is unknown. Unless the watch was the first from a
 *   list and gone before it delivered anything: the list's own version was too old, and listing
 *   at once would only get it again (a list that reads one object has that object's version,
 *   older than a restarted kube-apiserver's watch cache). That is a failure, with its backoff.
 * - **Failures** (a list or watch that fails, a watch that ends before it was established)
 *   wait the one backoff of src/retry on the injected clock, or the server's `Retry-After` on
 *   a 429 or 503 when that is longer.
 * - **Established**: the watch answered 200 and then delivered an event or a bookmark, or stayed
 *   open `establishedAfterMs` (30 s) counted from when it was sent. Only that resets the
 *   backoff, never a list that was answered or a 200 alone: an API server or proxy that accepts
 *   watches and drops them at once then sees fewer and fewer requests, not a storm. The time
 *   counts too because a quiet object sends nothing, and a server without bookmarks neither.
 *   It is counted from the request, not the answer, so that a test clock moved once the server
 *   holds the watch does not race the client reading the answer.
 * - The client-side rate limit (src/kube/rate-limit.ts) applies to every list (the API clients'
 *   middleware) and every watch (src/kube/watch-stream.ts).
 * - An event that does not decode is counted (`decodeErrors`, `onDecodeError`), never dropped in
 *   silence; the watch goes on.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { AgentError, KubeUnavailableError, describeError, isAgentError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { Backoff, WATCH_BACKOFF, type BackoffPolicy } from '../retry/backoff.js';
import { kubeStatusOf, toKubeError } from './api-errors.js';
import type { KubeTransport } from './connection-pool.js';
import { watchStream, WatchHttpError } from './watch-stream.js';

/** A watch open this long counts as established even without events. */
export const WATCH_ESTABLISHED_AFTER_MS = 30_000;

/** The longest `Retry-After` honoured; a longer one waits this long. */
export const MAX_RETRY_AFTER_MS = 5 * 60_000;

/** Where a reflector watches: the credentials, the collection, its selectors. */
export interface WatchTarget {
  kc: KubeConfig;
  transport: KubeTransport;
  /** The collection's API path (`/api/v1/nodes`). */
  path: string;
  /** The list's selectors, repeated by the watch. */
  query: Record<string, string>;
  /** The Machine CRD's group, when watching Machines: a 404 then says the CRD is missing. */
  crdGroup?: string;
}

/** What a list found, and where to watch from. */
export interface Listed {
  items: unknown[];
  /** The resourceVersion to watch from (the list's, or the one object's). */
  resourceVersion: string | undefined;
  /** Where to watch (taken at each list: credentials may change between lists). */
  target: WatchTarget;
}

/** What a reflector follows: how to list it, and how to read its objects. */
export interface ReflectorSource<T> {
  /** What is watched, for errors and logs: "Node n1", "ConfigMap ns/name". */
  what: string;
  /** List (at start, and after a 410). Errors may be raw client errors or AgentErrors. */
  list: (signal: AbortSignal) => Promise<Listed>;
  /** Turn an object of the list or an event into `T`; throws when it does not decode. */
  decode: (object: unknown) => T;
}

export interface ReflectorOptions<T> extends ReflectorSource<T> {
  /** Every list's items (those that decoded): the state the watch starts from. */
  onList: (items: T[]) => void;
  onEvent: (type: 'ADDED' | 'MODIFIED' | 'DELETED', item: T) => void;
  /** An object or line that did not decode (already counted in `decodeErrors`). */
  onDecodeError?: (err: AgentError) => void;
  /** A BOOKMARK arrived (its resourceVersion is kept). */
  onBookmark?: (resourceVersion: string) => void;
  /** The watch stream is open (true) or no more (false). */
  onConnected?: (connected: boolean) => void;
  /** A list or watch failed; the next try comes after `retryInMs`. */
  onFailure?: (err: AgentError, retryInMs: number) => void;
  /** The watch ended without a failure: `closed` resumes from the last resourceVersion, `gone` lists again. */
  onRestart?: (reason: 'closed' | 'gone') => void;
  /** Stop for good after this failure instead of retrying (e.g. Forbidden, to fall back). */
  giveUp?: (err: AgentError) => boolean;
  clock: Clock;
  backoff?: BackoffPolicy;
  establishedAfterMs?: number;
  /** Ask the server to end each watch after this long (default: 5 to 10 minutes, random, as client-go). */
  timeoutSeconds?: () => number;
}

export interface Reflector {
  /** Run until `signal` aborts, `stop()` is called or `giveUp` says so. Never rejects. */
  start(signal?: AbortSignal): Promise<void>;
  /** End the run and wait for it. */
  stop(): Promise<void>;
  /** End the open watch and list again (e.g. the watched object must be created anew). */
  relist(): void;
  /** The last resourceVersion seen (list, event or bookmark). */
  readonly resourceVersion: string | undefined;
  /** Events and lines that did not decode, since this reflector was made. */
  readonly decodeErrors: number;
  /** Failures in the current streak (0 once a watch is established). */
  readonly failures: number;
}

/** How one watch ended. */
type WatchEnd =
  | { kind: 'closed'; established: boolean }
  | { kind: 'gone'; detail: string | undefined; established: boolean }
  | { kind: 'relist' }
  | { kind: 'aborted' }
  | { kind: 'error'; err: AgentError };

/** The server's `Retry-After` of a 429 or 503 anywhere in `err`'s cause chain, in ms. */
export function retryAfterMs(err: unknown, nowMs: number): number | undefined {
  for (let e: unknown = err, depth = 0; e !== null && e !== undefined && depth < 8; depth += 1) {
    const code = kubeStatusOf(e)?.code;
    if (code === 429 || code === 503) {
      const header =
        e instanceof WatchHttpError
          ? e.retryAfter
          : ((e as { headers?: Record<string, unknown> }).headers?.['retry-after'] as unknown);
      const ms = parseRetryAfter(header, nowMs);
      if (ms !== undefined) return Math.min(ms, MAX_RETRY_AFTER_MS);
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** `Retry-After`: delay-seconds or an HTTP-date (RFC 9110, 10.2.3). */
function parseRetryAfter(value: unknown, nowMs: number): number | undefined {
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : undefined;
}

export function createReflector<T>(o: ReflectorOptions<T>): Reflector {
  const backoff = new Backoff(o.backoff ?? WATCH_BACKOFF);
  const establishedAfterMs = o.establishedAfterMs ?? WATCH_ESTABLISHED_AFTER_MS;
  const timeoutSeconds = o.timeoutSeconds ?? (() => 300 + Math.floor(Math.random() * 300));
  let resourceVersion: string | undefined;
  let decodeErrors = 0;
  let stopper = new AbortController();
  let running: Promise<void> | null = null;
  /** Ends the open watch to list again (set while a watch is open). */
  let endWatch: ((end: WatchEnd) => void) | null = null;
  let relistWanted = false;

  const decodeFailed = (err: unknown, raw: unknown): void => {
    decodeErrors += 1;
    o.onDecodeError?.(
      new KubeUnavailableError(`watch ${o.what}: cannot decode ${describeRaw(raw)}: ${describeError(err)}`, {
        cause: err,
        data: { reason: 'Decode' },
      }),
    );
  };

  const decoded = (object: unknown): T | undefined => {
    try {
      return o.decode(object);
    } catch (err) {
      decodeFailed(err, object);
      return undefined;
    }
  };

  /** One watch from `resourceVersion`, until it ends. */
  async function watchOnce(target: WatchTarget, signal: AbortSignal): Promise<WatchEnd> {
    const watchSignal = new AbortController();
    const onAbort = (): void => watchSignal.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    let established = false;
    let connected = false;
    const sentAt = o.clock.now();
    const from = resourceVersion;
    let ended: WatchEnd | null = null;
    const end = (e: WatchEnd): void => {
      if (ended !== null) return;
      ended = e;
      watchSignal.abort();
    };
    endWatch = end;
    const progress = (rv: unknown): void => {
      if (typeof rv === 'string' && rv !== '') resourceVersion = rv;
      if (!established) {
        established = true;
        backoff.reset();
      }
    };
    /** A watch that answered and stayed open long enough was established, however it ended. */
    const stayedOpen = (): void => {
      if (!established && connected && o.clock.now() - sentAt >= establishedAfterMs) {
        established = true;
        backoff.reset();
      }
    };
    /** Run a handler of the caller: one that throws ends this watch as a failure, never the process. */
    const guarded = (fn: () => void): void => {
      try {
        fn();
      } catch (err) {
        const message = `watch ${o.what}: a handler failed: ${describeError(err)}`;
        end({
          kind: 'error',
          err: isAgentError(err) ? err : new AgentError('INTERNAL', message, { cause: err }),
        });
      }
    };
    const handleEvent = (type: string, object: unknown): void => {
      const rv = (object as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') {
        const item = decoded(object);
        // Handled (a handler that throws is retried from before it), or did not decode (counted;
        // it would not decode the next time either): resume after it.
        if (item !== undefined) o.onEvent(type, item);
        progress(rv);
      } else if (type === 'BOOKMARK') {
        progress(rv);
        if (typeof rv === 'string') o.onBookmark?.(rv);
      } else if (type === 'ERROR') {
        const status = (object ?? {}) as { code?: unknown; message?: unknown; reason?: unknown };
        const message = typeof status.message === 'string' ? status.message : undefined;
        if (status.code === 410) end({ kind: 'gone', detail: message, established });
        else {
          end({
            kind: 'error',
            err: new KubeUnavailableError(
              `watch ${o.what}: the server ended the watch with an error: ${message ?? JSON.stringify(object)}`,
              {
                data: {
                  reason: typeof status.reason === 'string' ? status.reason : 'WatchError',
                  status: status.code,
                },
              },
            ),
          });
        }
      } else {
        decodeFailed(new Error(`unexpected event type ${JSON.stringify(type)}`), object);
      }
    };
    try {
      await watchStream(target.kc, target.transport, {
        path: target.path,
        query: {
          ...target.query,
          allowWatchBookmarks: true,
          resourceVersion: from,
          timeoutSeconds: timeoutSeconds(),
        },
        signal: watchSignal.signal,
        onOpen: () => {
          connected = true;
          guarded(() => o.onConnected?.(true));
        },
        onUndecodable: (line, err) => guarded(() => decodeFailed(err, line)),
        onEvent: (type, object) => {
          if (ended === null) guarded(() => handleEvent(type, object));
        },
      });
      stayedOpen();
      if (ended !== null) return ended;
      if (signal.aborted) return { kind: 'aborted' };
      return { kind: 'closed', established };
    } catch (err) {
      stayedOpen();
      if (ended !== null) return ended;
      if (signal.aborted) return { kind: 'aborted' };
      if (kubeStatusOf(err)?.code === 410) return { kind: 'gone', detail: undefined, established };
      const context = target.crdGroup === undefined ? {} : { crdGroup: target.crdGroup };
      return { kind: 'error', err: toKubeError(err, `watch ${o.what}`, context) };
    } finally {
      endWatch = null;
      signal.removeEventListener('abort', onAbort);
      watchSignal.abort();
      if (connected) o.onConnected?.(false);
    }
  }

  async function run(signal: AbortSignal): Promise<void> {
    let target: WatchTarget | null = null;
    let listNeeded = true;
    /** The next watch is the first from a list. */
    let justListed = false;
    while (!signal.aborted) {
      let failure: AgentError;
      try {
        if (listNeeded || relistWanted || target === null) {
          relistWanted = false;
          const listed = await o.list(signal);
          if (signal.aborted) return;
          target = listed.target;
          resourceVersion = listed.resourceVersion;
          listNeeded = false;
          const items: T[] = [];
          for (const raw of listed.items) {
            const item = decoded(raw);
            if (item !== undefined) items.push(item);
          }
          o.onList(items);
          justListed = true;
        }
        const fromList = justListed;
        justListed = false;
        const end = await watchOnce(target, signal);
        if (end.kind === 'aborted') return;
        if (end.kind === 'relist') {
          listNeeded = true;
          continue;
        }
        if (end.kind === 'gone') {
          listNeeded = true;
          // The resourceVersion is gone from the server's history: list again, at once…
          if (!fromList || end.established) {
            o.onRestart?.('gone');
            continue;
          }
          // …unless it was the list's own: a failure.
          failure = new KubeUnavailableError(
            `watch ${o.what}: the version the list gave (${resourceVersion ?? 'none'}) was gone at once${end.detail ? `: ${end.detail}` : ''}`,
            { data: { reason: 'Expired', status: 410 } },
          );
        } else if (end.kind === 'closed' && end.established) {
          o.onRestart?.('closed');
          continue;
        } else {
          failure =
            end.kind === 'error'
              ? end.err
              : new KubeUnavailableError(
                  `watch ${o.what}: the API server closed the watch before it delivered anything`,
                  { data: { reason: 'WatchClosed' } },
                );
        }
      } catch (err) {
        if (signal.aborted) return;
        // `toKubeError` keeps the raw error as the cause, where `retryAfterMs` finds its header.
        failure = err instanceof AgentError ? err : toKubeError(err, `list ${o.what}`);
      }
      if (o.giveUp?.(failure) === true) return;
      const delay = Math.max(backoff.next(), retryAfterMs(failure, o.clock.now()) ?? 0);
      o.onFailure?.(failure, delay);
      try {
        await o.clock.sleep(delay, signal);
      } catch {
        return;
      }
    }
  }

  return {
    start(signal) {
      if (running !== null) return running;
      stopper = new AbortController();
      const s = signal === undefined ? stopper.signal : AbortSignal.any([signal, stopper.signal]);
      running = run(s).finally(() => {
        running = null;
      });
      return running;
    },
    async stop() {
      stopper.abort();
      await running;
    },
    relist() {
      relistWanted = true;
      endWatch?.({ kind: 'relist' });
    },
    get resourceVersion() {
      return resourceVersion;
    },
    get decodeErrors() {
      return decodeErrors;
    },
    get failures() {
      return backoff.failures;
    },
  };
}

function describeRaw(raw: unknown): string {
  if (typeof raw === 'string') return `the line ${JSON.stringify(raw.slice(0, 80))}`;
  const meta = (raw as { kind?: unknown; metadata?: { name?: unknown } } | null) ?? {};
  return `an object${typeof meta.metadata?.name === 'string' ? ` named ${meta.metadata.name}` : ''}`;
}
