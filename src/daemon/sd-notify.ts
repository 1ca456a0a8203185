/**
 * systemd's readiness and watchdog protocol (sd_notify) for agentd.service (`Type=notify`):
 * `READY=1` once startup recovery is done and the API serves, so `systemctl start agentd`
 * returns only then; `STOPPING=1` when shutdown begins; `WATCHDOG=1` at half the unit's
 * `WatchdogSec=`, so systemd restarts an agent whose event loop is wedged.
 *
 * Node.js has no unix datagram sockets. Where `node:ffi` is there (the release's Node 26),
 * agentd sends each message itself, with libc's `socket` and `sendto` (ffi.ts), as sd_notify(3)
 * does. Elsewhere (Node 20), or when that fails, the message goes through `systemd-notify`, which
 * sends it on behalf of agentd's PID (`--pid`): a process started from agentd, once a minute for
 * the watchdog, which cost agentd more CPU at idle than the message itself (the fork of the
 * daemon; docs/benchmarks.md, "Footprint on a real host"). Outside systemd (no `NOTIFY_SOCKET`,
 * as under `npm start`) every call is a no-op. A message that cannot be sent is logged, never
 * fatal: readiness is also served on `/readyz`.
 */
import { execFile } from 'node:child_process';
import { bindLibc } from './ffi.js';
import type { Logger } from 'pino';
import type { Clock } from '../host/types.js';

export interface SdNotifier {
  /** Whether systemd asked for notifications (`NOTIFY_SOCKET` is set). */
  readonly enabled: boolean;
  ready(status: string): Promise<void>;
  stopping(status: string): Promise<void>;
  /** Ping the watchdog at half its interval until the returned function is called. */
  startWatchdog(): () => void;
}

export interface SdNotifyOptions {
  env: NodeJS.ProcessEnv;
  logger: Logger;
  clock: Clock;
  pid?: number;
  /** Runs `systemd-notify` (tests replace it). */
  send?: (args: string[]) => Promise<void>;
  /**
   * Sends one datagram to the notify socket from this process (`loadDatagramSender()`, the
   * default, where `pid` is this process); null: `systemd-notify` only.
   */
  datagram?: ((address: string, message: string) => void) | null;
}

/** `AF_UNIX`, `SOCK_DGRAM`, `SOCK_CLOEXEC`, `MSG_DONTWAIT` and `MSG_NOSIGNAL` (Linux). */
const AF_UNIX = 1;
const SOCK_DGRAM = 2;
const SOCK_CLOEXEC = 0o2000000;
const MSG_DONTWAIT = 0x40;
const MSG_NOSIGNAL = 0x4000;
/** `sizeof(((struct sockaddr_un *)0)->sun_path)`. */
const SUN_PATH_BYTES = 108;

/**
 * The `struct sockaddr_un` of `address` as `NOTIFY_SOCKET` gives it: a file system path, or an
 * abstract address written `@name` (a NUL, then the name, its length counted exactly).
 * `sun_family` is in host byte order: little-endian on x86-64 and arm64.
 */
export function sockaddrUn(address: string): Buffer {
  const abstract = address.startsWith('@');
  const name = Buffer.from(abstract ? address.slice(1) : address);
  if (address === '' || address === '@' || name.length + 1 > SUN_PATH_BYTES) {
    throw new Error(`NOTIFY_SOCKET ${JSON.stringify(address)} is not a unix socket address`);
  }
  const sa = Buffer.alloc(2 + 1 + name.length);
  sa.writeUInt16LE(AF_UNIX, 0);
  // A path ends with a NUL; an abstract name starts with one (the buffer's zero bytes).
  name.copy(sa, abstract ? 3 : 2);
  return sa;
}

/** The sd_notify(3) message of `systemd-notify`'s arguments: `--ready`, `--status=…`, `NAME=value`. */
export function notifyMessage(args: readonly string[]): string {
  return args
    .map((a) => (a === '--ready' ? 'READY=1' : a.startsWith('--status=') ? `STATUS=${a.slice(9)}` : a))
    .join('\n');
}

/**
 * Send one datagram to the notify socket from this process, through libc (see above); null where
 * `node:ffi` or a function is missing. Throws when the socket cannot be made or the message is
 * not sent whole.
 */
export function loadDatagramSender(): ((address: string, message: string) => void) | null {
  const socket = bindLibc('socket', { arguments: ['int32', 'int32', 'int32'], return: 'int32' });
  const sendto = bindLibc('sendto', {
    arguments: ['int32', 'buffer', 'uint64', 'int32', 'buffer', 'uint32'],
    return: 'int64',
  });
  const close = bindLibc('close', { arguments: ['int32'], return: 'int32' });
  if (socket === null || sendto === null || close === null) return null;
  return (address, message) => {
    const sa = sockaddrUn(address);
    const body = Buffer.from(message);
    const fd = Number(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (fd < 0) throw new Error('socket(AF_UNIX, SOCK_DGRAM) failed');
    try {
      // Never blocks the event loop: a full queue at systemd's end (a busy PID 1) fails the send,
      // and the notifier falls back to systemd-notify, whose wait is another process's.
      const sent = Number(sendto(fd, body, BigInt(body.length), MSG_DONTWAIT | MSG_NOSIGNAL, sa, sa.length));
      if (sent !== body.length) throw new Error(`sending to NOTIFY_SOCKET ${address} failed`);
    } finally {
      close(fd);
    }
  };
}

function execNotify(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('systemd-notify', args, { timeout: 10_000 }, (err, _stdout, stderr) =>
      err
        ? reject(new Error(`systemd-notify ${args.join(' ')}: ${stderr.trim() || err.message}`))
        : resolve(),
    );
  });
}

/**
 * The watchdog interval systemd set for this process, in ms, or null: `WATCHDOG_USEC` applies
 * only when `WATCHDOG_PID` is unset or names this process (sd_watchdog_enabled(3)).
 */
export function watchdogIntervalMs(env: NodeJS.ProcessEnv, pid: number): number | null {
  const usec = Number(env.WATCHDOG_USEC);
  if (!Number.isFinite(usec) || usec <= 0) return null;
  if (env.WATCHDOG_PID !== undefined && Number(env.WATCHDOG_PID) !== pid) return null;
  return Math.floor(usec / 1000);
}

export function createSdNotifier(options: SdNotifyOptions): SdNotifier {
  const pid = options.pid ?? process.pid;
  const enabled = typeof options.env.NOTIFY_SOCKET === 'string' && options.env.NOTIFY_SOCKET !== '';
  const send = options.send ?? execNotify;
  const log = options.logger;

  // From this process itself only when it is the PID systemd is told about.
  let datagram =
    enabled && pid === process.pid
      ? options.datagram !== undefined
        ? options.datagram
        : loadDatagramSender()
      : null;
  const notify = async (...messages: string[]): Promise<void> => {
    if (!enabled) return;
    if (datagram !== null) {
      try {
        datagram(options.env.NOTIFY_SOCKET as string, notifyMessage(messages));
        return;
      } catch (err) {
        // Said once; systemd-notify from now on.
        datagram = null;
        log.warn({ err: (err as Error).message }, 'could not notify systemd directly; using systemd-notify');
      }
    }
    try {
      await send([`--pid=${pid}`, ...messages]);
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'could not notify systemd');
    }
  };

  return {
    enabled,
    ready: (status) => notify('--ready', `--status=${status}`),
    stopping: (status) => notify('STOPPING=1', `--status=${status}`),
    startWatchdog: () => {
      const interval = enabled ? watchdogIntervalMs(options.env, pid) : null;
      if (interval === null) return () => undefined;
      // Half the interval, as sd_watchdog_enabled(3) recommends: one late ping is not fatal.
      const period = Math.max(1_000, Math.floor(interval / 2));
      const stop = new AbortController();
      void (async () => {
        for (;;) {
          try {
            await options.clock.sleep(period, stop.signal);
          } catch {
            return; // stopped
          }
          await notify('WATCHDOG=1');
        }
      })();
      return () => stop.abort();
    },
  };
}
