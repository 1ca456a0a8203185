/**
 * What the daemon costs its runtime (docs/benchmarks.md, "Footprint" and "CLI startup"): it
 * runs with V8's flags as Node ships them, from start to exit, so Node's embedded code cache of
 * its built-in modules is used and no code of its hot paths is dropped early; a join's downloads load
 * undici's dispatcher core and not, through undici's fetch and cookie modules, the copy of undici
 * that Node bundles.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { runtimeRecorder, startTestDaemon } from '../support/daemon.js';

/** The flag hash V8 puts in its code caches (bytes 12 to 15 of a cache's header), for `flags`. */
function flagHash(flags: string[]): string {
  const r = spawnSync(
    process.execPath,
    [
      ...flags,
      '-e',
      "process.stdout.write(new (require('node:vm').Script)('').createCachedData().subarray(12, 16).toString('hex'))",
    ],
    { encoding: 'utf8' },
  );
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
}

describe("the daemon's runtime", () => {
  it('keeps the flag hash of a plain node from start to exit, and a join does not load Node’s bundled undici', async () => {
    const recorder = await runtimeRecorder();
    const d = await startTestDaemon({
      args: ['--sim'],
      env: { NODE_OPTIONS: `--require ${recorder.preload}` },
    });
    const join = await d.rpc('update', { wait: true });
    expect((join.result as { state?: string } | undefined)?.state, JSON.stringify(join)).toBe('succeeded');
    expect(await d.stop()).toBe(0);
    const seen = await recorder.read();

    // At start, no flag V8 hashes into its caches: Node's cache of its built-in modules is valid.
    expect(seen.flagHashAtStart).toBe(flagHash([]));
    // Nor later: `--bytecode-old-age=1`, once set here when serving, cost bursts of RPC calls a
    // fifth of their throughput (docs/benchmarks.md, "RPC", and that file's history).
    expect(seen.flagHashAtExit).toBe(flagHash([]));
    expect(flagHash(['--bytecode-old-age=1'])).not.toBe(flagHash([]));
    // The join downloaded its artifacts with undici (src/provision/artifacts/http.ts) over
    // node:http's sockets; undici's entry would have made Node load its own copy too.
    expect(seen.builtins).toContain('net');
    expect(seen.builtins).not.toContain('internal/deps/undici/undici');
  });
});
