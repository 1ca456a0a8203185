/**
 * JSON-RPC over HTTP on the unix socket, through node:http's client (`request({ socketPath })`),
 * one connection per request: agentctl makes one call and exits, so nothing is pooled.
 */
import http from 'node:http';
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
 * One HTTP/1.1 request over the socket, on a connection of its own (`connection: close`);
 * resolves with the whole answer once it has been read.
 *
 * What can go wrong is told apart for the caller (src/cli/lost-answer.ts): a connection that
 * failed sent nothing; once the socket is connected the request is written, so a timeout, a
 * reset or a connection closed without a byte of answer may follow a request the daemon acted
 * on (`requestSent`). An answer that is malformed or cut is a BadAnswerError.
 */
export function requestOverSocket(o: HttpRequestOptions): Promise<SocketHttpAnswer> {
  return new Promise((resolve, reject) => {
    const body = o.body === undefined ? undefined : Buffer.from(o.body, 'utf8');
    let settled = false;
    const settle = (err: Error | null, answer?: SocketHttpAnswer): void => {
      if (settled) return;
      settled = true;
      req.destroy();
      if (err) reject(err);
      else resolve(answer as SocketHttpAnswer);
    };
    // Once connected, the request is written: from then on the daemon may have received it.
    let sent = false;
    let answered = false;
    const req = http.request({
      method: o.method,
      path: o.path,
      // A connection of its own, and no Agent: an Agent's socket setup (it matches the host
      // name against the IP address patterns, which V8 compiles first) cost agentctl ~6 ms of
      // CPU on Node 26, a fifth of a bare start (docs/benchmarks.md, "CLI startup").
      createConnection: () => net.createConnection(o.socketPath),
      headers: {
        host: 'localhost',
        connection: 'close',
        ...(body !== undefined
          ? { 'content-type': 'application/json', 'content-length': String(body.length) }
          : {}),
        ...o.headers,
      },
    });
    req.once('socket', (socket) => socket.once('connect', () => (sent = true)));
    if (o.timeoutMs !== undefined) {
      const limit = o.timeoutMs;
      req.setTimeout(limit, () =>
        settle(
          new DaemonUnreachableError(o.socketPath, 'timeout', `no answer within ${limit} ms`, sent, limit),
        ),
      );
    }
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (typeof err.code === 'string' && err.code.startsWith('HPE_')) {
        settle(new BadHttpAnswerError(`could not be parsed (${err.message})`));
      } else if (answered) {
        return; // a cut answer, told by the answer's own events below
      } else if (sent && err.code === 'ECONNRESET' && err.message === 'socket hang up') {
        // Closed before a whole status line and headers. Without a byte of answer (a daemon
        // stopping or dying as the call came in): unreachable, as for a refused connection, so
        // the caller knows nothing was answered; but the request went out, so a mutating one
        // may have been acted on.
        settle(
          (req.socket?.bytesRead ?? 0) > 0
            ? new BadHttpAnswerError('ends inside its headers')
            : new DaemonUnreachableError(o.socketPath, 'closed', CLOSED_WITHOUT_ANSWER, true),
        );
      } else {
        settle(unreachableError(o.socketPath, err, sent));
      }
    });
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      let received = 0;
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        received += c.length;
      });
      const cut = (): void => {
        const length = res.headers['content-length'];
        settle(
          new BadHttpAnswerError(
            length === undefined
              ? `was cut after ${received} bytes of body`
              : `was cut: ${received} of ${length} bytes of body`,
          ),
        );
      };
      res.on('error', cut);
      res.on('aborted', cut);
      res.on('end', () => {
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(res.headers)) {
          if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
        }
        settle(null, { status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('close', () => {
        if (!res.complete) cut();
      });
    });
    req.end(body);
  });
}

/** A malformed or cut HTTP answer: the daemon's, so a bug or a daemon that died while answering. */
class BadHttpAnswerError extends BadAnswerError {
  constructor(detail: string) {
    super(`the daemon's HTTP answer ${detail}`);
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
