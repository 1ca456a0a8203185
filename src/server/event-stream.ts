/**
 * `GET /v1/events`: the engine's events as server-sent events (docs/api.md, "Events (SSE)").
 *
 * Each client gets a bounded buffer: what the socket has not taken yet (`writableLength`) may
 * not pass `bufferBytes`. A client that reads slower than events come is disconnected, counted
 * (`agentd_http_connections_closed_total{reason="slow_reader"}`) and logged, instead of
 * holding a growing queue of events in the daemon's memory (docs/operations.md, "Limits").
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { EngineEvent, EventBus } from '../engine/events.js';
import { makeWireError } from '../rpc/error-map.js';
import type { ConnectionGuard } from './connection-guard.js';
import { callerOf } from './rpc-route.js';

/** What an event-stream client may leave unread in the daemon before it is disconnected. */
export const EVENT_STREAM_BUFFER_BYTES = 64 * 1024;
/** The keep-alive comment's period (docs/api.md). */
export const EVENT_STREAM_HEARTBEAT_MS = 15_000;

export interface EventStreamOptions {
  events: EventBus;
  /** Snapshot sent first on every event stream, so a follower starts from the current state. */
  currentOperationEvents: (operationId: string | null) => EngineEvent[];
  logger: Logger;
  heartbeatMs?: number;
  bufferBytes?: number;
  guard?: ConnectionGuard;
  /**
   * The open streams' ends, called when the app closes: each stops its heartbeat and its
   * subscription first, then ends the response, so nothing is written after the end.
   */
  streams: Set<() => void>;
}

function sseFrame(seq: number, event: EngineEvent): string {
  return `id: ${seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/**
 * The query of `/v1/events`: `operation=ID`, or nothing. A filter that would silently match
 * nothing or everything — `?operation=` empty, given twice, or a parameter the stream does not
 * take (a typo) — is refused naming the parameter (docs/api.md).
 */
function eventsQuery(
  query: Record<string, unknown>,
): { operation: string | null } | { error: string; parameter: string } {
  for (const name of Object.keys(query)) {
    if (name !== 'operation') {
      const shown = name.slice(0, 64);
      return {
        error: `/v1/events takes no query parameter ${JSON.stringify(shown)}; only operation=ID`,
        parameter: shown,
      };
    }
  }
  const operation = query.operation;
  if (operation === undefined) return { operation: null };
  if (typeof operation !== 'string') {
    return { error: 'operation: give one operation id, not several', parameter: 'operation' };
  }
  if (operation === '') {
    return {
      error: 'operation: empty; give an operation id, or leave operation out to follow every operation',
      parameter: 'operation',
    };
  }
  return { operation };
}

function eventOperationId(event: EngineEvent): string {
  return event.type === 'operation' ? event.operation.id : event.operationId;
}

export function registerEventStream(app: FastifyInstance, o: EventStreamOptions): void {
  const bufferBytes = o.bufferBytes ?? EVENT_STREAM_BUFFER_BYTES;
  app.get('/v1/events', (req, reply) => {
    const query = eventsQuery(req.query as Record<string, unknown>);
    if ('error' in query) {
      const error = makeWireError('INVALID_REQUEST', query.error, { parameter: query.parameter });
      return reply.code(400).send({ jsonrpc: '2.0', id: null, error });
    }
    const filter = query.operation;
    reply.hijack();
    const res = reply.raw;
    o.guard?.markStream(req.raw.socket);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    const write = (text: string): void => {
      if (res.destroyed || res.writableEnded) return;
      res.write(text);
      if (res.writableLength > bufferBytes) {
        o.logger.info(
          { caller: callerOf(req.headers), buffered: res.writableLength, limit: bufferBytes },
          'event stream closed: its client reads slower than events come',
        );
        o.guard?.closed('slow_reader');
        res.destroy();
      }
    };
    write(': agentd event stream\n\n');
    for (const event of o.currentOperationEvents(filter)) write(sseFrame(0, event));
    const unsubscribe = o.events.subscribe((seq, event) => {
      if (filter === null || eventOperationId(event) === filter) write(sseFrame(seq, event));
    });
    const heartbeat = setInterval(
      () => write(': keep-alive\n\n'),
      o.heartbeatMs ?? EVENT_STREAM_HEARTBEAT_MS,
    );
    const close = (): void => {
      clearInterval(heartbeat);
      unsubscribe();
      o.streams.delete(end);
    };
    const end = (): void => {
      close();
      res.end();
    };
    o.streams.add(end);
    req.raw.once('close', close);
    res.once('close', close);
  });
}
