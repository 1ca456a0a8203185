/**
 * The vitest part of `npm test` (docs/testing.md): the `main` project (unit, integration and
 * system tests: CPU-bound) and the `host` project (the real-host suite: minutes per file, mostly
 * waiting on real systemd) run as two vitest processes side by side, so the hosts' waiting
 * overlaps the CPU work. `main`'s output streams as it comes; `host`'s lines are prefixed with
 * `[host]`. Exits non-zero when either fails; Ctrl-C or SIGTERM reaches both.
 *
 * Arguments are passed to both (e.g. `npm test -- --bail 1`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** Arguments for both; with filters one project may match no file, which is then no failure. */
const ARGS = process.argv.length > 2 ? ['--passWithNoTests', ...process.argv.slice(2)] : [];
const VITEST = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));
/** The real-host files each drive a host of their own, mostly waiting: two at a time. */
const HOST_WORKERS = '2';

function run(
  project: string,
  extra: string[],
  prefix: string | null,
): { child: ChildProcess; done: Promise<number> } {
  const child = spawn(process.execPath, [VITEST, 'run', '--project', project, ...extra, ...ARGS], {
    stdio: ['ignore', prefix === null ? 'inherit' : 'pipe', prefix === null ? 'inherit' : 'pipe'],
  });
  if (prefix !== null) {
    for (const stream of [child.stdout, child.stderr]) {
      if (stream)
        createInterface({ input: stream }).on('line', (line) => process.stdout.write(`${prefix}${line}\n`));
    }
  }
  const done = new Promise<number>((resolve) => {
    child.on('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
    child.on('error', (err) => {
      process.stderr.write(`vitest ${project}: ${err.message}\n`);
      resolve(1);
    });
  });
  return { child, done };
}

const host = run('host', ['--maxWorkers', HOST_WORKERS], '[host] ');
const main = run('main', [], null);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    for (const c of [host.child, main.child]) c.kill(signal);
  });
}
const [mainCode, hostCode] = await Promise.all([main.done, host.done]);
process.stdout.write(
  `\nnpm test: main project ${mainCode === 0 ? 'passed' : `FAILED (${mainCode})`}, real-host project ${hostCode === 0 ? 'passed' : `FAILED (${hostCode})`}\n`,
);
process.exit(mainCode !== 0 ? mainCode : hostCode);
