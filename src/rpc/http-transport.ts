/**
 * JSON-RPC over HTTP on the unix socket with node:http (cheap to load: agentctl's startup time
 * matters more than a pooled client here).
 */
import http from 'node:http';
import net from 'node:net';
import type { RpcTransport } from './client.js';

/** The daemon could not be reached on its socket. `reason` says why, for the hint. */
export class DaemonUnreachableError extends Error {
  constructor(
    readonly socketPath: string,
    readonly reason: 'missing' | 'refused' | 'permission' | 'timeout' | 'other',
    detail: string,
  ) {
    super(detail);
    this.name = 'DaemonUnreachableError';
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

/** Why a connection to the socket failed, as a DaemonUnreachableError (for the hint). */
export function unreachableError(socketPath: string, err: NodeJS.ErrnoException): DaemonUnreachableError {
  const reason =
    err.code === 'ENOENT'
      ? 'missing'
      : err.code === 'ECONNREFUSED'
        ? 'refused'
        : err.code === 'EACCES'
          ? 'permission'
          : 'other';
  return new DaemonUnreachableError(socketPath, reason, err.message);
}

/** One HTTP request over the socket; resolves with status and body text. */
export function requestOverSocket(
  o: HttpRequestOptions,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        // One connection of its own, without an http.Agent: the agent's pooling buys a one-shot
        // CLI nothing, and its TLS server-name check (net.isIP on the host) compiles a large
        // regular expression that alone was ~9 % of `agentctl status` (docs/benchmarks.md).
        createConnection: () => net.createConnection(o.socketPath),
        method: o.method,
        path: o.path,
        headers: { ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}), ...o.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            headers: res.headers,
          }),
        );
        res.on('error', reject);
      },
    );
    if (o.timeoutMs !== undefined) {
      req.setTimeout(o.timeoutMs, () => {
        req.destroy(
          new DaemonUnreachableError(o.socketPath, 'timeout', `no answer within ${o.timeoutMs} ms`),
        );
      });
    }
    req.on('error', (err: NodeJS.ErrnoException) =>
      reject(err instanceof DaemonUnreachableError ? err : unreachableError(o.socketPath, err)),
    );
    req.end(o.body);
  });
}

export function createHttpTransport(options: {
  socketPath: string;
  timeoutMs?: number;
  caller?: string;
}): RpcTransport {
  return async (request) => {
    const res = await requestOverSocket({
      socketPath: options.socketPath,
      method: 'POST',
      path: '/rpc',
      body: JSON.stringify(request),
      timeoutMs: options.timeoutMs,
      headers: { 'x-agentd-caller': options.caller ?? 'agentctl' },
    });
    if (res.status === 204) return null;
    try {
      return JSON.parse(res.body) as unknown;
    } catch {
      throw new Error(`the daemon answered HTTP ${res.status} with a body that is not JSON`);
    }
  };
}
