import path from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';

const CHILD = path.resolve(import.meta.dirname, '../../support/run-program-child.ts');

/** Run the child program with `env`; its stdout arrives through a pipe. */
const runChild = (env: Record<string, string>) =>
  execa(process.execPath, ['--import', 'tsx', CHILD], { env, reject: false, timeout: 20_000 });

describe('runProgram', () => {
  it('waits for pending work by default: the exit code is the main’s, after the event loop empties', async () => {
    const r = await runChild({ OUT_BYTES: '10' });
    expect(r.exitCode).toBe(7);
    expect(r.stdout).toBe(`${'x'.repeat(10)}timer fired`);
  });

  it('with exitWhenSettled, exits once the main settles, with all of stdout written', async () => {
    // 4 MiB is far more than a pipe holds: the writes must have reached the reader in full. The
    // timer would keep the process for two minutes, past the 20 s timeout, if the exit waited.
    const r = await runChild({
      OUT_BYTES: String(4 * 1024 * 1024),
      TIMER_MS: '120000',
      EXIT_WHEN_SETTLED: '1',
    });
    expect(r.timedOut).toBe(false);
    expect(r.exitCode).toBe(7);
    expect(r.stdout).toBe('x'.repeat(4 * 1024 * 1024));
  });

  it('with exitWhenSettled, a main that throws is reported on stderr and exits 1 at once', async () => {
    const r = await runChild({ MAIN_THROWS: '1', TIMER_MS: '120000', EXIT_WHEN_SETTLED: '1' });
    expect(r.timedOut).toBe(false);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain('child: Error: main failed');
    expect(r.stdout).toBe('');
  });
});
