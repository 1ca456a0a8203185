/**
 * A unix socket that takes agentctl's requests and answers none of them: it keeps the connection
 * open (a daemon that has not answered yet), or closes it once the request has arrived (a daemon
 * stopping or dying as the request came in), or writes an answer that cannot be read (cut short,
 * garbled) and closes it. With `runInProcess`, agentctl runs in this process against it with its
 * Ctrl-C handler captured.
 */
import net from 'node:net';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { runCli } from '../../src/cli/main.js';
import { systemClock } from '../../src/host/clock.js';
import { recordingStream } from './cli.js';

export interface UnansweringDaemon {
  socket: string;
  /** Resolves once a request naming `method` has arrived. */
  received(method: string): Promise<void>;
  /** Whether a request naming `method` has arrived. */
  seen(method: string): boolean;
  close(): Promise<void>;
}

/**
 * Listen on `dir`/silent.sock. `closeOnRequest`: close each connection (without a byte of answer)
 * as soon as its request has arrived, instead of keeping it open; the socket is then
 * `dir`/closing.sock. `badAnswer`: write it as the answer, then close; the socket is then
 * `dir`/garbled.sock.
 */
export async function unansweringDaemon(
  dir: string,
  options: { closeOnRequest?: boolean; badAnswer?: string } = {},
): Promise<UnansweringDaemon> {
  const socket = path.join(
    dir,
    options.badAnswer !== undefined
      ? 'garbled.sock'
      : options.closeOnRequest
        ? 'closing.sock'
        : 'silent.sock',
  );
  const conns = new Set<net.Socket>();
  let seen = '';
  const has = (method: string): boolean => seen.includes(`"method":"${method}"`);
  const waiting: { method: string; resolve: () => void }[] = [];
  const server = net.createServer((c) => {
    conns.add(c);
    c.on('data', (chunk: Buffer) => {
      seen += chunk.toString('utf8');
      // agentctl writes the head and the body of its request at once.
      if (/"method":"/.test(chunk.toString('utf8'))) {
        if (options.badAnswer !== undefined) c.end(options.badAnswer);
        else if (options.closeOnRequest) c.end();
      }
      for (const w of waiting.filter((x) => has(x.method))) w.resolve();
    });
    c.on('error', () => undefined);
    c.on('close', () => conns.delete(c));
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    socket,
    received: (method) =>
      has(method) ? Promise.resolve() : new Promise((resolve) => waiting.push({ method, resolve })),
    seen: has,
    close: async () => {
      for (const c of conns) c.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface InProcessRun {
  done: Promise<{ code: number; stdout: string; stderr: string }>;
  /** What agentctl wrote on stderr so far. */
  stderr(): string;
}

/**
 * Run agentctl in this process (`args` after `agentctl`); `interrupts.fire` is its Ctrl-C
 * handler once it installs one (the last one it installed). `onInterruptInstalled` is called
 * with it as it is installed.
 */
export function runInProcess(
  args: string[],
  cwd: string,
  interrupts: { fire?: () => void; onInstalled?: (fire: () => void) => void } = {},
): InProcessRun {
  const stdout = recordingStream();
  const stderr = recordingStream();
  const proc = {
    stdin: new PassThrough(),
    clock: systemClock,
    onInterrupt(handler: () => void) {
      interrupts.fire = handler;
      interrupts.onInstalled?.(handler);
      return () => undefined;
    },
  };
  const done = runCli(['node', 'agentctl', ...args], { env: {}, cwd, stdout, stderr, proc }).then((code) => ({
    code,
    stdout: stdout.text(),
    stderr: stderr.text(),
  }));
  return { done, stderr: () => stderr.text() };
}
