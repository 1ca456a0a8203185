/**
 * An incremental parser of server-sent events (the `text/event-stream` format, as the HTML
 * standard's "Interpreting an event stream" processes it): feed it chunks as they arrive, get
 * back the complete events. Comments (`: keep-alive`) are dropped.
 */

/** One server-sent event. */
export interface SseEvent {
  /** The `event:` field; "message" when the event has none. */
  event: string;
  /** The `data:` lines joined with newlines. */
  data: string;
  /**
   * The last event ID: the latest `id:` field seen so far, in this event or an earlier one (the
   * standard keeps it across events; a reconnect sends it as `Last-Event-ID`); null before any.
   */
  id: string | null;
}

export interface SseParser {
  /** Parse a chunk; returns the events it completed (a partial event waits for the next chunk). */
  push(chunk: string): SseEvent[];
}

export function createSseParser(): SseParser {
  let buffer = '';
  let event = '';
  let data: string[] = [];
  // The "last event ID buffer": set by an `id:` field, kept across events, never reset by one.
  let id: string | null = null;

  const line = (text: string, out: SseEvent[]): void => {
    if (text === '') {
      // A blank line ends an event; one without data (only comments or fields) is not dispatched.
      if (data.length > 0) out.push({ event: event || 'message', data: data.join('\n'), id });
      event = '';
      data = [];
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    // An id with a NUL is ignored (the standard: it could not be sent back in a header).
    else if (field === 'id' && !value.includes('\0')) id = value;
  };

  return {
    push(chunk) {
      buffer += chunk;
      const out: SseEvent[] = [];
      for (;;) {
        const nl = buffer.search(/\r\n|\r|\n/);
        if (nl === -1) break;
        const eolLength = buffer.startsWith('\r\n', nl) ? 2 : 1;
        // A lone \r at the very end may be the first half of \r\n: wait for more.
        if (buffer[nl] === '\r' && eolLength === 1 && nl === buffer.length - 1) break;
        line(buffer.slice(0, nl), out);
        buffer = buffer.slice(nl + eolLength);
      }
      return out;
    },
  };
}
