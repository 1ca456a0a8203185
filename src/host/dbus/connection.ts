/**
 * A D-Bus client connection over a unix socket: SASL `EXTERNAL` authentication (the kernel tells
 * the peer who we are; we only name our uid), `Hello` when the peer is a message bus, then method
 * calls matched to their replies by serial. Signals and calls from the peer are ignored: agentd
 * only asks. Every wait runs on the injected clock and ends at its deadline or the caller's signal.
 */
import { connect, type Socket } from 'node:net';
import { CancelledError, TimeoutError } from '../../errors.js';
import type { Clock } from '../types.js';
import { decodeMessage, encodeMethodCall, messageLength, MessageType, WireError } from './wire.js';
import type { Message, MethodCall } from './wire.js';

/** The peer answered a call with an error message (`org.freedesktop.DBus.Error.*`, …). */
export class DBusError extends Error {
  constructor(
    /** The D-Bus error name, e.g. `org.freedesktop.machine1.NoSuchMachine`. */
    readonly errorName: string,
    message: string,
  ) {
    super(`${errorName}: ${message}`);
    this.name = 'DBusError';
  }
}

/** The connection could not be made, was refused, broke, or the peer spoke nonsense. */
export class BusConnectionError extends Error {
  constructor(
    message: string,
    /** The system error code (`ENOENT`, `ECONNREFUSED`, …) when there was one. */
    readonly code?: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'BusConnectionError';
  }
}

export interface CallOptions {
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface BusConnection {
  /** The reply to `call`; rejects with `DBusError` for an error reply. */
  call(call: MethodCall, options: CallOptions): Promise<Message>;
  /** Close the socket; calls still waiting reject. */
  close(): void;
  readonly closed: boolean;
}

export interface OpenBusOptions extends CallOptions {
  /** Send `Hello` first: a message bus requires it, a direct connection to a service must not. */
  hello: boolean;
  clock: Clock;
}

const AUTH_LINE_MAX = 512;

/** Connect to the D-Bus socket at `socketPath` and authenticate. */
export async function openBus(socketPath: string, options: OpenBusOptions): Promise<BusConnection> {
  const what = `connect to D-Bus at ${socketPath}`;
  const socket = connect({ path: socketPath });
  // Never what keeps the process alive: a pending call's deadline does that.
  socket.unref();
  try {
    const leftover = await withDeadline(authenticate(socket, socketPath), options, what);
    const bus = new Connection(socket, options.clock, socketPath);
    if (leftover.length > 0) bus.receive(leftover);
    if (options.hello) {
      await bus.call(
        {
          destination: 'org.freedesktop.DBus',
          path: '/org/freedesktop/DBus',
          interface: 'org.freedesktop.DBus',
          member: 'Hello',
        },
        options,
      );
    }
    return bus;
  } catch (err) {
    socket.destroy();
    throw err;
  }
}

/** SASL EXTERNAL; resolves with any bytes that arrived after the `OK` line. */
function authenticate(socket: Socket, socketPath: string): Promise<Buffer> {
  const uid = String(process.getuid?.() ?? 0);
  return new Promise((resolve, reject) => {
    let received: Buffer = Buffer.alloc(0);
    const done = (err: Error | null, rest?: Buffer): void => {
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      if (err) reject(err);
      else resolve(rest ?? Buffer.alloc(0));
    };
    const onError = (err: NodeJS.ErrnoException): void =>
      done(
        new BusConnectionError(`connect to D-Bus at ${socketPath}: ${err.message}`, err.code, { cause: err }),
      );
    const onClose = (): void =>
      done(new BusConnectionError(`D-Bus at ${socketPath} closed during authentication`));
    const onData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n');
      if (end < 0) {
        if (received.length > AUTH_LINE_MAX)
          done(new BusConnectionError(`D-Bus at ${socketPath}: no answer line to AUTH`));
        return;
      }
      const line = received.toString('latin1', 0, end);
      if (!line.startsWith('OK ')) {
        done(new BusConnectionError(`D-Bus at ${socketPath} refused authentication as uid ${uid}: ${line}`));
        return;
      }
      socket.write('BEGIN\r\n');
      done(null, received.subarray(end + 2));
    };
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
    socket.write(`\0AUTH EXTERNAL ${Buffer.from(uid, 'latin1').toString('hex')}\r\n`);
  });
}

interface Waiter {
  resolve(message: Message): void;
  reject(err: Error): void;
}

class Connection implements BusConnection {
  private serial = 0;
  private readonly waiting = new Map<number, Waiter>();
  private buffered: Buffer = Buffer.alloc(0);
  private failure: Error | null = null;

  constructor(
    private readonly socket: Socket,
    private readonly clock: Clock,
    private readonly socketPath: string,
  ) {
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', (err: NodeJS.ErrnoException) =>
      this.fail(new BusConnectionError(`D-Bus at ${socketPath}: ${err.message}`, err.code, { cause: err })),
    );
    socket.on('close', () =>
      this.fail(new BusConnectionError(`D-Bus at ${socketPath} closed the connection`)),
    );
  }

  get closed(): boolean {
    return this.failure !== null;
  }

  receive(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    try {
      for (;;) {
        const length = messageLength(this.buffered);
        if (length === null || this.buffered.length < length) return;
        const message = decodeMessage(this.buffered.subarray(0, length));
        this.buffered = this.buffered.subarray(length);
        this.dispatch(message);
      }
    } catch (err) {
      const reason = err instanceof WireError ? err.message : String(err);
      this.fail(new BusConnectionError(`D-Bus at ${this.socketPath}: ${reason}`, undefined, { cause: err }));
    }
  }

  private dispatch(message: Message): void {
    if (message.type !== MessageType.MethodReturn && message.type !== MessageType.Error) return;
    const waiter = message.replySerial === undefined ? undefined : this.waiting.get(message.replySerial);
    if (!waiter || message.replySerial === undefined) return;
    this.waiting.delete(message.replySerial);
    if (message.type === MessageType.MethodReturn) {
      waiter.resolve(message);
      return;
    }
    const text = typeof message.body[0] === 'string' ? message.body[0] : '(no message)';
    waiter.reject(new DBusError(message.errorName ?? 'org.freedesktop.DBus.Error.Failed', text));
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.socket.destroy();
    for (const waiter of this.waiting.values()) waiter.reject(err);
    this.waiting.clear();
  }

  async call(call: MethodCall, options: CallOptions): Promise<Message> {
    if (this.failure) throw this.failure;
    this.serial = this.serial >= 0xffffffff ? 1 : this.serial + 1;
    const serial = this.serial;
    const reply = new Promise<Message>((resolve, reject) => this.waiting.set(serial, { resolve, reject }));
    this.socket.write(encodeMethodCall(call, serial));
    const what = `D-Bus call ${call.interface ?? ''}.${call.member} to ${call.destination ?? this.socketPath}`;
    try {
      return await withDeadline(reply, { ...options, clock: this.clock }, what);
    } finally {
      this.waiting.delete(serial);
    }
  }

  close(): void {
    this.fail(new BusConnectionError(`D-Bus connection to ${this.socketPath} was closed`));
  }
}

/** `work`, or TIMEOUT at `timeoutMs` on the clock, or CANCELLED when `signal` aborts. */
async function withDeadline<T>(
  work: Promise<T>,
  options: CallOptions & { clock: Clock },
  what: string,
): Promise<T> {
  const { signal, timeoutMs, clock } = options;
  if (signal?.aborted) throw new CancelledError(what, { cause: signal.reason });
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  const deadline = clock.sleep(timeoutMs, stop.signal).then(
    () => {
      throw new TimeoutError(what, timeoutMs);
    },
    () => {
      if (signal?.aborted) throw new CancelledError(what, { cause: signal.reason });
      return new Promise<never>(() => undefined); // the work ended first
    },
  );
  try {
    return await Promise.race([work, deadline]);
  } finally {
    stop.abort();
    signal?.removeEventListener('abort', onAbort);
  }
}
