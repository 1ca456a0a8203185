/**
 * One watch request: `GET <path>?watch=true&…` read as a stream of JSON lines, each an event
 * `{type, object}`. The reflector (src/kube/reflector.ts) runs every watch of agentd through it.
 *
 * agentd does not use client-node's `Watch` here, for three things it cannot give
 * (@kubernetes/client-node 1.4, dist/watch.js, `Watch.watch`):
 * - an answer other than 200 becomes `new Error(statusText)` with only `statusCode`: the
 *   `Retry-After` header of a 429 or 503 and the Status body are dropped;
 * - a line that is not JSON is dropped (`catch { // ignore parse errors }`), so decode errors
 *   cannot be counted;
 * - it has no extension point for the rate limit or the agent, other than replacing the
 *   KubeConfig's `applyToFetchOptions`.
 * So the request is made with Node's own http/https client, from what client-node's supported
 * `KubeConfig.applyToFetchOptions` gives (the credentials' headers and the agent it made for
 * the cluster's TLS options), after the rate limit, with that agent swapped for the pool's.
 */
import http from 'node:http';
import https from 'node:https';
import { createInterface } from 'node:readline';
import type { KubeConfig } from '@kubernetes/client-node';
import { BARE_TRANSPORT, type KubeTransport } from './connection-pool.js';

/** Bytes of a refused watch's body read for its Status (the rest is dropped). */
const MAX_ERROR_BODY = 64 * 1024;

/** A watch request the server answered with a status other than 200. */
export class WatchHttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    /** The `Retry-After` header, as sent. */
    readonly retryAfter: string | undefined,
    /** The Status body's `reason`, when there was one. */
    readonly reason: string | undefined,
  ) {
    super(message);
    this.name = 'WatchHttpError';
  }
}

export interface WatchStreamRequest {
  path: string;
  query: Record<string, string | number | boolean | undefined>;
  signal: AbortSignal;
  /** The server answered 200: the stream is open. */
  onOpen?: () => void;
  /** One decoded line. Must not throw. */
  onEvent: (type: string, object: unknown) => void;
  /** A line that is not a JSON event. Must not throw. */
  onUndecodable: (line: string, err: Error) => void;
}

/**
 * Send the watch request and read its events until the stream ends. Resolves when the server
 * ended the stream or `signal` aborted it; rejects with a `WatchHttpError` for an answer other
 * than 200, or with the network error that broke it.
 */
export async function watchStream(
  kc: KubeConfig,
  transport: KubeTransport = BARE_TRANSPORT,
  r: WatchStreamRequest,
): Promise<void> {
  const server = kc.getCurrentCluster()?.server;
  if (server === undefined) throw new Error('the kubeconfig has no current cluster');
  await transport.limiter?.acquire(r.signal);
  const init = await kc.applyToFetchOptions({});
  const url = new URL(server.replace(/\/+$/, '') + r.path);
  url.searchParams.set('watch', 'true');
  for (const [key, value] of Object.entries(r.query)) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  const headers: Record<string, string> = { accept: 'application/json' };
  new Headers(init.headers as ConstructorParameters<typeof Headers>[0]).forEach((value, key) => {
    headers[key] = value;
  });
  let agent = init.agent as http.Agent | undefined;
  if (agent instanceof http.Agent && transport.pool !== null) agent = transport.pool.share(agent);
  const client = url.protocol === 'https:' ? https : http;
  if (r.signal.aborted) return;

  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const settle = (err?: unknown): void => {
      if (settled) return;
      settled = true;
      r.signal.removeEventListener('abort', onAbort);
      if (err === undefined) resolve();
      else reject(err instanceof Error ? err : new Error(String(err)));
    };
    const req = client.request(url, { method: 'GET', headers, ...(agent ? { agent } : {}) });
    const onAbort = (): void => {
      req.destroy();
      settle();
    };
    r.signal.addEventListener('abort', onAbort, { once: true });
    // As client-node's Watch: TCP keep-alive finds a connection that died without a word.
    req.on('socket', (socket) => socket.setKeepAlive(true, 30_000));
    req.on('error', (err) => settle(err));
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        readRefusal(res).then(settle, settle);
        return;
      }
      r.onOpen?.();
      res.setEncoding('utf8');
      const lines = createInterface({ input: res, crlfDelay: Infinity });
      lines.on('line', (line) => {
        if (settled || line.trim() === '') return;
        let event: { type?: unknown; object?: unknown };
        try {
          event = JSON.parse(line) as { type?: unknown; object?: unknown };
        } catch (err) {
          r.onUndecodable(line, err instanceof Error ? err : new Error(String(err)));
          return;
        }
        if (typeof event !== 'object' || event === null || typeof event.type !== 'string') {
          r.onUndecodable(line, new Error('not a watch event: no "type"'));
          return;
        }
        r.onEvent(event.type, event.object);
      });
      res.on('error', (err) => settle(err));
      // readline passes its input's errors on to the interface: without this, uncaught.
      lines.on('error', (err) => settle(err));
      // `aborted` then `close` when the connection broke mid-stream: an error, not an end.
      res.on('close', () => settle(res.complete ? undefined : connectionClosed()));
    });
    req.end();
  });
}

function connectionClosed(): Error {
  return Object.assign(new Error('the watch connection closed before the stream ended'), {
    code: 'ECONNRESET',
  });
}

/** The error of an answer other than 200, with its Status and `Retry-After`. */
async function readRefusal(res: http.IncomingMessage): Promise<WatchHttpError> {
  const code = res.statusCode ?? 0;
  let body = '';
  try {
    for await (const chunk of res) {
      if (body.length < MAX_ERROR_BODY) body += String(chunk);
    }
  } catch {
    // The status alone says enough.
  }
  let message = http.STATUS_CODES[code] ?? `HTTP ${code}`;
  let reason: string | undefined;
  try {
    const status = JSON.parse(body) as { message?: unknown; reason?: unknown };
    if (typeof status.message === 'string') message = status.message;
    if (typeof status.reason === 'string') reason = status.reason;
  } catch {
    // Not a Status: keep the status text.
  }
  const retryAfter = res.headers['retry-after'];
  return new WatchHttpError(code, message, typeof retryAfter === 'string' ? retryAfter : undefined, reason);
}
