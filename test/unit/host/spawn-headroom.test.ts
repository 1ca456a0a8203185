/**
 * A spawn without descriptors (src/host/spawn-headroom.ts): execa throws at once and the child
 * process it dropped emits an `error` nobody hears, which ended the process. The production
 * runner must fail the command with EMFILE instead, and run it once descriptors are free. The
 * child runs under `ulimit -n 128` (bash), so that it can take every descriptor it may have.
 */
import path from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';

const CHILD = path.resolve(import.meta.dirname, '../../support/spawn-emfile-child.ts');

describe('spawn headroom', () => {
  it('fails a command with EMFILE when descriptors are out, lives on, says nothing of kubelet, and runs the command once they are free', async () => {
    const r = await execa(
      'bash',
      ['-c', 'ulimit -n 128 && exec "$0" --import tsx "$1"', process.execPath, CHILD],
      { reject: false, timeout: 30_000 },
    );
    // A crash (the unheard `error` event) would exit 1 with the stack on stderr.
    expect(r.exitCode, r.stderr).toBe(0);
    const [first, health, probe, second] = r.stdout
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    // The reserve (src/engine/reserve.ts) reads it as descriptors: it frees its own and retries.
    expect(first).toMatchObject({
      ok: false,
      code: 'COMMAND_FAILED',
      causeCode: 'EMFILE',
      reserve: 'descriptors',
    });
    expect(first?.message).toMatch(/^true: could not be run \(EMFILE: too many open files\)/);
    // The kubelet check (src/host/machines-health.ts) without a descriptor: unknown, not unhealthy.
    expect(health).toEqual({ threw: 'EMFILE' });
    // The version probe (src/provision/artifacts/version-check.ts): EMFILE, not "not installed".
    expect(probe).toEqual({ threw: 'EMFILE' });
    expect(second).toEqual({ ok: true, exitCode: 0 });
  });
});
