/** What a program does once its main has settled. */
export interface RunOptions {
  /**
   * Exit as soon as the main has settled and stdout and stderr hold nothing unwritten, instead of
   * waiting for the event loop to empty and Node to tear the runtime down. For a one-shot command
   * (agentctl) that wait is pure cost: on Node 26 it was ~4.7 ms of a 32 ms `status --json` run by
   * `node`, 0.6–1.2 ms in the release executable (docs/benchmarks.md, "CLI startup"). Only for a
   * program whose main awaits all of its work:
   * whatever is still pending when it settles (a timer, a socket not yet closed) is dropped.
   */
  exitWhenSettled?: boolean;
}

/**
 * `prog … | head`: the reader went away, so there is nobody left to tell anything. Exit quietly
 * (with the exit code set so far) instead of dying on an unhandled EPIPE with a stack trace; any
 * other error on stdout or stderr is thrown as before. Returns a function that takes the handlers
 * off again: agentd keeps them only while it prints help, versions and usage errors.
 */
export function exitQuietlyOnBrokenPipe(): () => void {
  const onError = (err: NodeJS.ErrnoException): void => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  };
  const streams = [process.stdout, process.stderr];
  for (const stream of streams) stream.on('error', onError);
  return () => {
    for (const stream of streams) stream.off('error', onError);
  };
}

/** Run a program's main to its end: its result is the exit code, a throw is reported and exit 1. */
export function runProgram(name: string, main: () => Promise<number>, o: RunOptions = {}): void {
  const done = (code: number): void => {
    process.exitCode = code;
    if (o.exitWhenSettled) exitOnceWritten(code);
  };
  main().then(done, (err: unknown) => {
    process.stderr.write(`${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    done(1);
  });
}

/**
 * Exit with `code` once stdout and stderr have handed all their data to the kernel. On Linux,
 * writes to a file, a pipe or a terminal are synchronous, so there is nothing left by now; a
 * stream that still holds data (a stream made asynchronous by whoever started the process) is
 * waited for, and exit comes once it drains or fails.
 */
export function exitOnceWritten(code: number): void {
  const pending = [process.stdout, process.stderr].filter((s) => s.writableLength > 0 && !s.destroyed);
  if (pending.length === 0) {
    process.exit(code);
    return;
  }
  let left = pending.length;
  const one = (): void => {
    left -= 1;
    if (left === 0) process.exit(code);
  };
  for (const stream of pending) {
    stream.once('drain', one);
    stream.once('error', one);
  }
}
