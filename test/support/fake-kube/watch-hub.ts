/**
 * Watch streams: chunked JSON lines of `{type, object}` like the real server. A watch replays the
 * retained history after its resourceVersion (or sends the current objects as ADDED when it has
 * none), then follows live writes; a compacted version gets an ERROR event with a 410 Status and
 * the stream ends, exactly like kube-apiserver does.
 */
import type { ServerResponse } from 'node:http';
import { apiVersionOf } from './resources.js';
import { matchesFields, parseFieldSelector, parseLabelSelector } from './selectors.js';
import { badRequest, expiredStatus } from './status.js';
import type { ObjectStore, StoredEvent } from './store.js';
import type { Json, KubeObject, ResourceDef } from './types.js';

interface OpenWatch {
  res: ServerResponse;
  def: ResourceDef;
  matches: (obj: KubeObject) => boolean;
  bookmarks: boolean;
  timer: NodeJS.Timeout | undefined;
}

export class WatchHub {
  private readonly open = new Set<OpenWatch>();
  private waiters: Array<{ count: number; resolve: () => void }> = [];
  private readonly unsubscribe: () => void;

  constructor(private readonly store: ObjectStore) {
    this.unsubscribe = store.subscribe((event) => this.publish(event));
  }

  get openCount(): number {
    return this.open.size;
  }

  /** Resolves once at least `count` watches are open. */
  whenOpen(count: number): Promise<void> {
    if (this.open.size >= count) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }

  /** Serve one watch request; the response stays open until cut, timed out or closed. */
  serve(res: ServerResponse, def: ResourceDef, namespace: string | undefined, query: URLSearchParams): void {
    const fields = parseFieldSelector(query.get('fieldSelector'), def.fieldSelectors);
    const labels = parseLabelSelector(query.get('labelSelector'));
    const matches = (obj: KubeObject): boolean =>
      (namespace === undefined || obj.metadata.namespace === namespace) &&
      matchesFields(obj, fields) &&
      labels(obj.metadata.labels ?? {});
    const rvParam = query.get('resourceVersion');
    if (rvParam !== null && rvParam !== '' && !/^\d+$/.test(rvParam)) {
      throw badRequest(`resourceVersion: Invalid value: ${JSON.stringify(rvParam)}: must be a number`);
    }

    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    const watch: OpenWatch = {
      res,
      def,
      matches,
      bookmarks: query.get('allowWatchBookmarks') === 'true',
      timer: undefined,
    };

    if (rvParam === null || rvParam === '' || rvParam === '0') {
      // No version: the current state first, as synthetic ADDED events.
      for (const obj of this.store.list(def.key)) if (matches(obj)) this.send(watch, 'ADDED', obj);
    } else {
      const rv = Number(rvParam);
      if (rv < this.store.oldestWatchableRv) {
        this.send(watch, 'ERROR', expiredStatus(rvParam, this.store.oldestWatchableRv));
        res.end();
        return;
      }
      for (const event of this.store.eventsSince(rv, def.key)) {
        if (matches(event.object)) this.send(watch, event.type, event.object);
      }
    }
    // Replay and registration happen in the same tick, so no write can fall between them.
    this.open.add(watch);
    const ready = this.waiters.filter((w) => this.open.size >= w.count);
    this.waiters = this.waiters.filter((w) => this.open.size < w.count);
    for (const w of ready) w.resolve();
    const timeoutSeconds = Number(query.get('timeoutSeconds') ?? '0');
    if (timeoutSeconds > 0) watch.timer = setTimeout(() => this.end(watch, false), timeoutSeconds * 1000);
    res.on('close', () => this.forget(watch));
  }

  /** Send a BOOKMARK with the current resourceVersion to every watch that asked for bookmarks. */
  sendBookmarks(): void {
    const rv = String(this.store.currentRv);
    for (const watch of this.open) {
      if (!watch.bookmarks) continue;
      this.send(watch, 'BOOKMARK', {
        apiVersion: apiVersionOf(watch.def),
        kind: watch.def.kind,
        metadata: { resourceVersion: rv },
      });
    }
  }

  /** Write `line` as it is to every open watch. */
  sendRaw(line: string): void {
    for (const watch of this.open) if (!watch.res.writableEnded) watch.res.write(`${line}\n`);
  }

  /** End every open watch: cleanly (the server closes the stream) or abruptly (the socket dies). */
  cutAll(abrupt = false): number {
    const watches = [...this.open];
    for (const watch of watches) this.end(watch, abrupt);
    return watches.length;
  }

  close(): void {
    this.cutAll(true);
    this.unsubscribe();
  }

  private publish(event: StoredEvent): void {
    for (const watch of this.open) {
      if (watch.def.key === event.resource && watch.matches(event.object))
        this.send(watch, event.type, event.object);
    }
  }

  private send(watch: OpenWatch, type: string, object: KubeObject | Json): void {
    if (!watch.res.writableEnded) watch.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  private end(watch: OpenWatch, abrupt: boolean): void {
    this.forget(watch);
    if (abrupt) watch.res.destroy();
    else watch.res.end();
  }

  private forget(watch: OpenWatch): void {
    if (watch.timer !== undefined) clearTimeout(watch.timer);
    this.open.delete(watch);
  }
}
