/**
 * What the follower (src/cli/follow/follow-operation.ts) needs to know of an event stream,
 * apart from the node:http code that opens one (src/cli/follow/event-stream.ts).
 */
import type { StreamEvent } from '../types.js';

/** The daemon answered, but not with an event stream (an agentd without `/v1/events`). */
export class EventStreamUnavailableError extends Error {
  constructor(readonly status: number) {
    super(`GET /v1/events answered HTTP ${status}`);
    this.name = 'EventStreamUnavailableError';
  }
}

/** An open event stream. Iterating ends when the daemon closes it or `close()` is called. */
export interface EventStream extends AsyncIterable<StreamEvent> {
  close(): void;
}

/** Open a stream; the signature the follower takes, so tests can feed events without a daemon. */
export type OpenEventStream = (operationId: string) => Promise<EventStream>;
