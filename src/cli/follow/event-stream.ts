/**
 * `GET /v1/events` over the unix socket with node:http: an async iterable of the daemon's
 * operation events, closed by the caller or by the daemon. Imported when a command follows an
 * operation (src/cli/follow/follow-command.ts), so that the commands that never do (`status`)
 * do not load node:http (src/rpc/http-transport.ts).
 */
import http from 'node:http';
import { DaemonUnreachableError, unreachableError } from '../../rpc/http-transport.js';
import type { StreamEvent } from '../types.js';
import { createSseParser } from './sse-parser.js';
import { EventStreamUnavailableError, type EventStream } from './stream-types.js';

export { EventStreamUnavailableError, type EventStream, type OpenEventStream } from './stream-types.js';

/**
 * The least silence after which a stream is taken for dead: the daemon sends a keep-alive
 * comment every 15 s (docs/api.md), so even a short --timeout must not cut a healthy stream.
 */
export const MIN_STREAM_IDLE_MS = 60_000;

export interface EventStreamLimits {
  /** How long the daemon may take to answer the request (agentctl's call timeout). */
  answerTimeoutMs: number;
  /**
   * How long the open stream may stay silent (not even a keep-alive) before it is closed as
   * if the daemon had closed it: the follower then asks `operations.get`, which a wedged
   * daemon does not answer either, so following ends instead of waiting forever.
   */
  idleMs: number;
}

/** Open `GET /v1/events?operation=<id>` on the socket; resolves once the daemon has answered 200. */
export function openEventStream(
  socketPath: string,
  operationId: string,
  limits: EventStreamLimits,
): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      socketPath,
      method: 'GET',
      path: `/v1/events?operation=${encodeURIComponent(operationId)}`,
      headers: { accept: 'text/event-stream', 'x-agentd-caller': 'agentctl' },
    });
    let answered = false;
    req.setTimeout(limits.answerTimeoutMs, () => {
      if (answered) return;
      req.destroy();
      reject(
        new DaemonUnreachableError(
          socketPath,
          'timeout',
          `no answer to GET /v1/events within ${limits.answerTimeoutMs} ms`,
        ),
      );
    });
    req.on('error', (err: NodeJS.ErrnoException) => reject(unreachableError(socketPath, err)));
    req.on('response', (res) => {
      answered = true;
      if (res.statusCode !== 200) {
        res.resume();
        req.destroy();
        reject(new EventStreamUnavailableError(res.statusCode ?? 0));
        return;
      }
      // Silence from here on is measured anew: the idle limit replaces the answer timeout.
      req.setTimeout(limits.idleMs, () => req.destroy());
      res.setEncoding('utf8');
      const parser = createSseParser();
      const queue: StreamEvent[] = [];
      let ended = false;
      let wake: (() => void) | null = null;
      const notify = (): void => {
        const w = wake;
        wake = null;
        w?.();
      };
      res.on('data', (chunk: string) => {
        for (const e of parser.push(chunk)) {
          try {
            queue.push(JSON.parse(e.data) as StreamEvent);
          } catch {
            // A frame that is not JSON is not one of ours: skip it rather than stop following.
          }
        }
        notify();
      });
      const end = (): void => {
        ended = true;
        notify();
      };
      res.on('end', end);
      res.on('close', end);
      res.on('error', end);
      req.on('close', end);
      resolve({
        close() {
          ended = true;
          req.destroy();
          notify();
        },
        async *[Symbol.asyncIterator]() {
          for (;;) {
            const next = queue.shift();
            if (next) {
              yield next;
              continue;
            }
            if (ended) return;
            await new Promise<void>((r) => (wake = r));
          }
        },
      });
    });
    req.end();
  });
}
