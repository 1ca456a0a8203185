/**
 * The lock around every read-modify-write of the simulated host's state file, shared by the
 * daemon and the sim executables (`machinectl`, `systemctl`, `systemd-run`) on the same root.
 *
 * Across processes the lock is a unix socket bound in Linux's abstract namespace under a name
 * derived from the state file. Binding a name is exclusive, and the kernel frees it when the
 * holder's socket closes, however the holder ends — SIGKILL included, which the crash tests do
 * to the daemon mid-command. So there is no lock file to go stale, no PID to judge, and no
 * stale-lock takeover. (The lock file this replaces had one: a waiter that found the recorded
 * holder dead removed the lock, by then possibly a new holder's, and two writers ran at once.)
 *
 * Waiters connect to the holder's socket and retry as soon as it closes, instead of polling.
 */
import net from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { TimeoutError } from '../../errors.js';
import { abstractLockName, NAME_LOCKS_SUPPORTED, tryBindNameLock } from '../../host/name-lock.js';
import type { HeldNameLock } from '../../host/name-lock.js';

/** How long to wait for another process's lock before giving up, unless told otherwise. */
const LOCK_WAIT_MS = 15_000;

export interface SimStateLockOptions {
  /** How long to wait for another process's lock (default 15 s); then TIMEOUT. */
  waitMs?: number;
}

/** Whether the cross-process lock exists here: abstract unix sockets are Linux's. */
export const CROSS_PROCESS_LOCK = NAME_LOCKS_SUPPORTED;

/** The abstract socket name that locks `stateFile` (a leading NUL puts it in the abstract namespace). */
export function simLockName(stateFile: string): string {
  return abstractLockName('sim-state', stateFile);
}

/** Serializes holders within this process, per state file: cheaper, and first come first served. */
const inProcessTails = new Map<string, Promise<void>>();

/**
 * Run `fn` while holding the lock of `stateFile`: the in-process queue first (so concurrent
 * commands of one SimHost, or of two on the same root, do not contend on the socket), then the
 * socket for other processes. Throws TIMEOUT when another process holds it longer than
 * `options.waitMs`.
 */
export async function withSimStateLock<T>(
  stateFile: string,
  fn: () => Promise<T>,
  options: SimStateLockOptions = {},
): Promise<T> {
  const previous = inProcessTails.get(stateFile) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tail = previous.then(() => mine);
  inProcessTails.set(stateFile, tail);
  await previous;
  try {
    if (!CROSS_PROCESS_LOCK) return await fn();
    const held = await acquireSocketLock(simLockName(stateFile), stateFile, options.waitMs ?? LOCK_WAIT_MS);
    try {
      return await fn();
    } finally {
      await held.release();
    }
  } finally {
    release();
    if (inProcessTails.get(stateFile) === tail) inProcessTails.delete(stateFile);
  }
}

async function acquireSocketLock(name: string, stateFile: string, waitMs: number): Promise<HeldNameLock> {
  // Real time on purpose: this waits for another OS process, which an injected clock cannot advance.
  const deadline = Date.now() + waitMs;
  for (;;) {
    const held = await tryBindNameLock(name);
    if (held) return held;
    if (Date.now() >= deadline) {
      throw new TimeoutError(`sim: wait for the state lock of ${stateFile}`, waitMs);
    }
    await waitForRelease(name, deadline);
  }
}

// Wait until the holder of `name` lets go (its socket closes) or the deadline passes.
async function waitForRelease(name: string, deadline: number): Promise<void> {
  const connected = await new Promise<boolean>((resolve) => {
    let didConnect = false;
    const socket = net.connect({ path: name });
    const timer = setTimeout(() => socket.destroy(), Math.max(0, deadline - Date.now()));
    socket.on('connect', () => {
      didConnect = true;
    });
    socket.on('error', () => undefined); // 'close' follows, and says all we need
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(didConnect);
    });
  });
  // Refused: the holder was between release and our connect, or a new one between bind and
  // listen. Either way the name changes hands in microseconds; a short pause avoids spinning.
  if (!connected) await delay(1 + Math.random() * 4);
}
