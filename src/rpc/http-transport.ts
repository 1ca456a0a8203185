/**
 * JSON-RPC over HTTP on the unix socket, one connection per request: agentctl's start-up time
 * matters more here than a pooled client (`requestOverSocket`).
 */
import net from 'node:net';
import { BadAnswerError, type RpcTransport } from './client.js';
import { RPC_BODY_LIMIT } from './limits.js';

/**
 * The daemon could not be reached on its socket, or gave no answer. `reason` says why, for the
 * hint: `closed` when it closed the connection without a byte of answer.
 */
export class DaemonUnreachableError extends Error {
  constructor(
    readonly socketPath: string,
    readonly reason: 'missing' | 'refused' | 'permission' | 'timeout' | 'closed' | 'other',
    detail: string,
    /**
     * The connection was open and the request written to it when the failure came: the daemon
     * may have received the request and acted on it. False when the connection failed (no
     * socket, refused, permission): then nothing was sent.
     */
    readonly requestSent = false,
    /** For a timeout: the limit that passed. */
    readonly timeoutMs?: number,
  ) {
    super(detail);
    this.name = 'DaemonUnreachableError';
  }
}

/**
 * A request larger than the daemon accepts (RPC_BODY_LIMIT): refused before it is sent, since the
 * daemon would only refuse it (HTTP 413), and may close the connection while it is being written.
 */
export class RequestTooLargeError extends Error {
  constructor(
    readonly size: number,
    readonly limit: number,
  ) {
    super(`the request is ${size} bytes, more than the ${limit} bytes agentd accepts`);
    this.name = 'RequestTooLargeError';
  }
}

export interface HttpRequestOptions {
  socketPath: string;
  method: 'GET' | 'POST';
  path: string;
  body?: string;
  timeoutMs?: number;
  headers?: Record<string, string>;
}

/** What a connection that closed without a byte of answer says. */
export const CLOSED_WITHOUT_ANSWER = 'the daemon closed the connection without answering';

/**
 * Why a connection to the socket failed, as a DaemonUnreachableError (for the hint). With
 * `requestSent` (it failed after the request was written: a reset or broken connection), it was
 * closed on the request, whatever the error.
 */
export function unreachableError(
  socketPath: string,
  err: NodeJS.ErrnoException,
  requestSent = false,
): DaemonUnreachableError {
  const reason = requestSent
    ? 'closed'
    : err.code === 'ENOENT'
      ? 'missing'
      : err.code === 'ECONNREFUSED'
        ? 'refused'
        : err.code === 'EACCES'
          ? 'permission'
          : 'other';
  return new DaemonUnreachableError(socketPath, reason, err.message, requestSent);
}

/** An answer from the daemon: status, headers (names in lower case) and body text. */
export interface SocketHttpAnswer {
  status: number;
  body: string;
  headers: Record<string, string>;
}

/**
 * One HTTP/1.1 request over the socket, on a connection of its own that the daemon closes after
 * answering (`connection: close`); resolves with the whole answer once it has.
 *
 * Written on node:net rather than node:http: agentctl's start-up is what a script calling it in
 * a loop pays, and node:http's client (its modules, and its request path compiled on first use)
 * cost ~10 ms more than this on Node 26, a quarter of what agentctl adds to a bare Node start
 * (docs/benchmarks.md, "CLI startup"). The peer is agentd's own server, and the answer is read
 * whole, so the parsing needed is small: a status line, headers, and a body delimited by
 * `content-length` or chunked, or by the end of the connection. The event stream, which stays
 * open, uses node:http (src/cli/follow/event-stream.ts).
 */
export function requestOverSocket(o: HttpRequestOptions): Promise<SocketHttpAnswer> {
  return new Promise((resolve, reject) => {
    const body = o.body === undefined ? undefined : Buffer.from(o.body, 'utf8');
    const headers: Record<string, string> = {
      host: 'localhost',
      connection: 'close',
      ...(body !== undefined
        ? { 'content-type': 'application/json', 'content-length': String(body.length) }
        : {}),
      ...o.headers,
    };
    const head =
      `${o.method} ${o.path} HTTP/1.1\r\n` +
      Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('') +
      '\r\n';
    const chunks: Buffer[] = [];
    let settled = false;
    const settle = (err: Error | null, answer?: SocketHttpAnswer): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (err) reject(err);
      else resolve(answer as SocketHttpAnswer);
    };
    // Once connected, the request is written: from then on the daemon may have received it.
    let sent = false;
    const socket = net.createConnection(o.socketPath, () => {
      sent = true;
      socket.write(body === undefined ? head : Buffer.concat([Buffer.from(head, 'latin1'), body]));
    });
    if (o.timeoutMs !== undefined) {
      socket.setTimeout(o.timeoutMs, () =>
        settle(
          new DaemonUnreachableError(
            o.socketPath,
            'timeout',
            `no answer within ${o.timeoutMs} ms`,
            sent,
            o.timeoutMs,
          ),
        ),
      );
    }
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err: NodeJS.ErrnoException) => settle(unreachableError(o.socketPath, err, sent)));
    // The daemon closes the connection once it has answered; a close without an end (and
    // without an error) is parsed the same way, and a cut answer then fails to parse.
    const onEnd = (): void => {
      // Closed without a byte of answer (a daemon stopping or dying as the call came in):
      // unreachable, as for a refused connection, so the caller knows nothing was answered;
      // but the request went out, so a mutating one may have been acted on.
      if (chunks.length === 0) {
        settle(new DaemonUnreachableError(o.socketPath, 'closed', CLOSED_WITHOUT_ANSWER, sent));
        return;
      }
      try {
        settle(null, parseAnswer(Buffer.concat(chunks)));
      } catch (err) {
        settle(err as Error);
      }
    };
    socket.on('end', onEnd);
    socket.on('close', onEnd);
  });
}

/** A malformed or cut HTTP answer: the daemon's, so a bug or a daemon that died while answering. */
class BadHttpAnswerError extends BadAnswerError {
  constructor(detail: string) {
    super(`the daemon's HTTP answer ${detail}`);
  }
}

/** Parse a whole HTTP/1.1 answer read up to the end of the connection. */
export function parseAnswer(raw: Buffer): SocketHttpAnswer {
  let rest = raw;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) throw new BadHttpAnswerError(raw.length === 0 ? 'is empty' : 'ends inside its headers');
    const [statusLine = '', ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine);
    if (!m) throw new BadHttpAnswerError(`starts with ${JSON.stringify(statusLine.slice(0, 40))}`);
    const status = Number(m[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon <= 0)
        throw new BadHttpAnswerError(
          `has a header line without a name: ${JSON.stringify(line.slice(0, 40))}`,
        );
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    }
    rest = rest.subarray(end + 4);
    // An interim answer (100 Continue and the like) comes before the real one.
    if (status >= 100 && status < 200) continue;
    return { status, headers, body: answerBody(rest, status, headers).toString('utf8') };
  }
}

function answerBody(rest: Buffer, status: number, headers: Record<string, string>): Buffer {
  if (status === 204 || status === 304) return Buffer.alloc(0);
  if (/(?:^|,)\s*chunked\s*$/i.test(headers['transfer-encoding'] ?? '')) return dechunk(rest);
  const length = headers['content-length'];
  if (length === undefined) return rest;
  if (!/^\d+$/.test(length)) throw new BadHttpAnswerError(`has content-length ${JSON.stringify(length)}`);
  const n = Number(length);
  if (rest.length < n) throw new BadHttpAnswerError(`was cut: ${rest.length} of ${n} bytes of body`);
  return rest.subarray(0, n);
}

/** The body of a chunked answer (its trailers, if any, are dropped). */
function dechunk(raw: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = raw.indexOf('\r\n', at);
    if (lineEnd < 0) throw new BadHttpAnswerError('was cut inside a chunk size');
    const size = raw.subarray(at, lineEnd).toString('latin1').split(';')[0]?.trim() ?? '';
    if (!/^[0-9a-fA-F]+$/.test(size))
      throw new BadHttpAnswerError(`has a chunk size of ${JSON.stringify(size.slice(0, 20))}`);
    const n = parseInt(size, 16);
    if (n === 0) return Buffer.concat(parts);
    const start = lineEnd + 2;
    if (raw.length < start + n + 2) throw new BadHttpAnswerError('was cut inside a chunk');
    parts.push(raw.subarray(start, start + n));
    at = start + n + 2;
  }
}

export function createHttpTransport(options: {
  socketPath: string;
  timeoutMs?: number;
  caller?: string;
}): RpcTransport {
  return async (request) => {
    const body = JSON.stringify(request);
    // A UTF-16 code unit is at most 3 bytes of UTF-8: only a long body is measured.
    if (body.length * 3 > RPC_BODY_LIMIT && Buffer.byteLength(body) > RPC_BODY_LIMIT)
      throw new RequestTooLargeError(Buffer.byteLength(body), RPC_BODY_LIMIT);
    const res = await requestOverSocket({
      socketPath: options.socketPath,
      method: 'POST',
      path: '/rpc',
      body,
      timeoutMs: options.timeoutMs,
      headers: { 'x-agentd-caller': options.caller ?? 'agentctl' },
    });
    if (res.status === 204) return null;
    try {
      return JSON.parse(res.body) as unknown;
    } catch {
      throw new BadAnswerError(`the daemon answered HTTP ${res.status} with a body that is not JSON`);
    }
  };
}
