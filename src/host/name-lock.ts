/**
 * Locks that cannot go stale: a unix socket bound in Linux's abstract namespace under a name.
 * Binding a name is exclusive, and the kernel frees it when the holder's socket closes, however
 * the holder ends — SIGKILL included. So there is no lock file to judge, and no stale-lock
 * takeover that could race a new holder. Used for the daemon's single-instance lock and the
 * simulated host's state lock (docs/architecture.md).
 */
import { createHash } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';

/** Whether these locks exist here: abstract unix sockets are Linux's. */
export const NAME_LOCKS_SUPPORTED = process.platform === 'linux';

/** The abstract socket name for `kind` and a file path (a leading NUL puts it in the abstract namespace). */
export function abstractLockName(kind: string, file: string): string {
  const id = createHash('sha256').update(path.resolve(file)).digest('hex').slice(0, 32);
  return `\0agentd-${kind}-${id}`;
}

export interface HeldNameLock {
  /** Free the name, then close the connections of processes waiting for it. */
  release(): Promise<void>;
}

/**
 * Bind `name`; null when another socket holds it. The lock does not keep the process alive
 * (unref'd): it lives as long as the process or until `release`. With `answer`, every process
 * that connects is told it, one line (`askNameLockHolder`): who holds the lock.
 */
export async function tryBindNameLock(
  name: string,
  options: { answer?: string } = {},
): Promise<HeldNameLock | null> {
  const server = net.createServer();
  const waiters = new Set<net.Socket>();
  server.on('connection', (socket) => {
    waiters.add(socket);
    socket.on('error', () => undefined); // a waiter that gave up; nothing to do
    socket.on('close', () => waiters.delete(socket));
    if (options.answer !== undefined) socket.write(`${options.answer}\n`);
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ path: name, exclusive: true }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') return null;
    throw err;
  }
  server.on('error', () => undefined); // nothing can fail after listen that would matter here
  server.unref();
  let released: Promise<void> | null = null;
  return {
    release: () =>
      (released ??= new Promise<void>((resolve) => {
        // Free the name first, then wake the waiters, so that their next bind can succeed.
        server.close(() => resolve());
        for (const socket of waiters) socket.destroy();
      })),
  };
}

/** Whether `name` is held, and what its holder answered (null: nothing, within the time allowed). */
export type NameLockProbe = { held: false } | { held: true; answer: string | null };

/**
 * Whether a process holds `name`, without taking it (a start at the same moment is never
 * disturbed), and what it answers (`tryBindNameLock`'s `answer`). Held is the answer whenever
 * that cannot be ruled out: only a refused connection says that nobody holds the name. Real
 * time: the holder is another process.
 */
export async function probeNameLock(name: string, timeoutMs = 1000): Promise<NameLockProbe> {
  return new Promise((resolve) => {
    let text = '';
    const socket = net.connect({ path: name });
    const done = (probe: NameLockProbe): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(probe);
    };
    const timer = setTimeout(() => done({ held: true, answer: null }), timeoutMs);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      const end = text.indexOf('\n');
      if (end >= 0) done({ held: true, answer: text.slice(0, end) });
    });
    socket.on('error', (err: NodeJS.ErrnoException) =>
      done(
        err.code === 'ECONNREFUSED' || err.code === 'ENOENT' ? { held: false } : { held: true, answer: null },
      ),
    );
    // Connected, then closed without a line: a holder that answers nothing (an older agentd).
    socket.on('close', () => done({ held: true, answer: null }));
  });
}

/**
 * What the holder of `name` answers (`tryBindNameLock`'s `answer`), or null when nobody holds it,
 * the holder answers nothing within `timeoutMs` (one that does not answer: an older agentd), or
 * anything fails.
 */
export async function askNameLockHolder(name: string, timeoutMs = 1000): Promise<string | null> {
  const probe = await probeNameLock(name, timeoutMs);
  return probe.held ? probe.answer : null;
}
