/**
 * Bounds on the clients of an HTTP listener (docs/operations.md, "Limits"): how many connections
 * it holds, and how long a connection may take to send its request.
 *
 * At the limit a new connection is admitted by closing the oldest connection that is not in the
 * middle of a request: an idle keep-alive connection (or one that has sent nothing yet) first,
 * else an event stream. Only when every connection is busy with a request (long polls such as
 * `operations.wait`, bodies still arriving) does the new one go to a small reserve, whose
 * connections may ask only for the probes and `status`: the questions an operator or a
 * supervisor asks of a daemon in trouble. Past the reserve a connection is closed at once.
 * Eviction keeps the listener useful when it is full of connections doing nothing (the usual
 * case: clients that hold connections open); the reserve keeps `status` and `/readyz`
 * answering when it is full of work, without letting that work grow past the limit.
 */
import { readFileSync } from 'node:fs';
import http, { type RequestListener } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionLimits {
  /** Connections that may serve any route. */
  maxConnections: number;
  /** Connections beyond `maxConnections`, when none can be evicted: probes and `status` only. */
  reserve: number;
  /** Time from a connection's (or a request's) first byte to the end of its headers. */
  headersTimeoutMs: number;
  /** Time to receive a whole request, body included. */
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection is kept. */
  keepAliveTimeoutMs: number;
  /** How often node:http looks for requests past the two timeouts above. */
  timeoutCheckMs: number;
}

/** Why a connection was closed by the guard: the `reason` label of `agentd_http_connections_closed_total`. */
export type CloseReason = 'evicted' | 'refused' | 'reserve_only' | 'slow_reader';

/** The timeouts every listener gets (docs/operations.md, "Limits"). */
export const DEFAULT_TIMEOUTS = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  timeoutCheckMs: 1_000,
} as const;

/** The share of the descriptor limit the admin socket's connections may use, and its bounds. */
const SHARE_OF_DESCRIPTORS = 4;
const MIN_CONNECTIONS = 16;
const MAX_CONNECTIONS = 1024;
const RESERVE = 8;
/** When the descriptor limit cannot be read: Linux's usual soft limit. */
const FALLBACK_NOFILE = 1024;

/**
 * The soft `Max open files` of `/proc/self/limits` (the text given, else this process's), or null
 * when it cannot be read. Node raises the soft limit to the hard one as it starts, so this is what
 * the process really has.
 */
export function readDescriptorLimit(text?: string): number | null {
  let limits = text;
  if (limits === undefined) {
    try {
      limits = readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return null;
    }
  }
  const line = limits.split('\n').find((l) => l.startsWith('Max open files'));
  const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
  if (soft === 'unlimited') return Number.MAX_SAFE_INTEGER;
  return soft !== undefined && /^\d+$/.test(soft) ? Number(soft) : null;
}

/**
 * The admin socket's limits for a process with `nofile` descriptors: a quarter of them, between
 * 16 and 1024, plus a reserve of 8. Three quarters stay for the engine's own files (downloads,
 * layers being unpacked, journal writes, host commands' pipes, D-Bus) and the metrics listener.
 */
export function connectionLimitsFor(nofile: number | null): ConnectionLimits {
  const n = nofile ?? FALLBACK_NOFILE;
  const share = Math.floor(n / SHARE_OF_DESCRIPTORS);
  return {
    maxConnections: Math.max(MIN_CONNECTIONS, Math.min(MAX_CONNECTIONS, share)),
    reserve: RESERVE,
    ...DEFAULT_TIMEOUTS,
  };
}

/** The TCP metrics listener's limits: Prometheus holds one connection per scraper. */
export const METRICS_LISTENER_LIMITS: ConnectionLimits = {
  maxConnections: 32,
  reserve: 0,
  ...DEFAULT_TIMEOUTS,
};

interface Connection {
  /** Requests under way on it (pipelined requests count each). */
  busy: number;
  /** It carries an event stream, which never ends by itself: evicted like an idle connection. */
  stream: boolean;
  /** Admitted from the reserve: it may ask only for the probes and `status`. */
  reserved: boolean;
}

export interface ConnectionGuard {
  /** Open connections, reserve included. */
  readonly size: number;
  /** Mark `socket` as carrying an event stream. */
  markStream(socket: Socket): void;
  /** True for a connection admitted from the reserve. */
  isReserved(socket: Socket): boolean;
  /** Count a connection closed for `reason` outside the guard (an event stream too slow to read). */
  closed(reason: CloseReason): void;
}

export interface GuardEvents {
  /** The number of open connections changed. */
  onSize?: (size: number) => void;
  /** The guard (or a user of it: `closed`) closed a connection. */
  onClose?: (reason: CloseReason) => void;
}

/** A node:http server with `limits` applied, and the guard that holds its connections. */
export function createGuardedServer(
  limits: ConnectionLimits,
  handler: RequestListener,
  events: GuardEvents = {},
): { server: http.Server; guard: ConnectionGuard } {
  const server = http.createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: limits.timeoutCheckMs,
    },
    handler,
  );
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  // Insertion order is connection order: the first evictable entry is the oldest.
  const connections = new Map<Socket, Connection>();
  let reservedCount = 0;
  const sized = (): void => events.onSize?.(connections.size);

  const forget = (socket: Socket): void => {
    const c = connections.get(socket);
    if (c === undefined) return;
    connections.delete(socket);
    if (c.reserved) reservedCount--;
    sized();
  };

  /** The oldest connection not in a request, else the oldest event stream. */
  const evictable = (): Socket | undefined => {
    let stream: Socket | undefined;
    for (const [socket, c] of connections) {
      if (c.reserved) continue;
      if (c.busy === 0) return socket;
      if (c.stream && stream === undefined) stream = socket;
    }
    return stream;
  };

  server.on('connection', (socket: Socket) => {
    let reserved = false;
    if (connections.size - reservedCount >= limits.maxConnections) {
      const victim = evictable();
      if (victim !== undefined) {
        forget(victim);
        victim.destroy();
        events.onClose?.('evicted');
      } else if (reservedCount < limits.reserve) {
        reserved = true;
      } else {
        socket.destroy();
        events.onClose?.('refused');
        return;
      }
    }
    connections.set(socket, { busy: 0, stream: false, reserved });
    if (reserved) reservedCount++;
    sized();
    socket.once('close', () => forget(socket));
  });

  // Before the handler: a request is under way from its first listener on.
  server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const c = connections.get(req.socket);
    if (c === undefined) return;
    c.busy++;
    res.once('close', () => {
      c.busy--;
    });
  });

  const guard: ConnectionGuard = {
    get size() {
      return connections.size;
    },
    markStream(socket) {
      const c = connections.get(socket);
      if (c !== undefined) c.stream = true;
    },
    isReserved(socket) {
      return connections.get(socket)?.reserved === true;
    },
    closed(reason) {
      events.onClose?.(reason);
    },
  };
  return { server, guard };
}
