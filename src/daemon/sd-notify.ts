/**
 * systemd's readiness and watchdog protocol (sd_notify) for agentd.service (`Type=notify`):
 * `READY=1` once startup recovery is done and the API serves, so `systemctl start agentd`
 * returns only then; `STOPPING=1` when shutdown begins; `WATCHDOG=1` at half the unit's
 * `WatchdogSec=`, so systemd restarts an agent whose event loop is wedged.
 *
 * Node.js has no unix datagram sockets, so each message goes through `systemd-notify`, a child
 * of agentd. As root, systemd-notify sends the message with agentd's PID as its sender (the
 * invoking process, and `--pid` names it too), so systemd attributes it to the unit's main
 * process and waits for nothing else: the unit says `NotifyAccess=main`
 * (systemd-notify(1), systemd 252). It also waits until systemd has read the message, so a
 * `READY=1` is never lost to the child exiting first. Outside systemd (no `NOTIFY_SOCKET`, as
 * under `npm start`) every call is a no-op. A message that cannot be sent is logged, never
 * fatal: readiness is also served on `/readyz`.
 */
import { execFile } from 'node:child_process';
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
  /** Runs `systemd-notify` with these arguments (tests replace it). */
  send?: (args: string[]) => Promise<void>;
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

  const notify = async (...messages: string[]): Promise<void> => {
    if (!enabled) return;
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
