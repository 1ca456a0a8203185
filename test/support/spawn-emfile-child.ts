/**
 * Child of test/unit/host/spawn-headroom.test.ts, run under a low RLIMIT_NOFILE: takes every
 * free descriptor, runs a command through the production runner (it must fail, and the process
 * must live on), asks the kubelet health check, frees some descriptors and runs the command again. Prints one JSON line per attempt.
 */
import { closeSync, openSync } from 'node:fs';
import { exhaustion } from '../../src/engine/reserve.js';
import { createExecaRunner } from '../../src/host/execa-runner.js';
import { createHttpKubeletHealthCheck } from '../../src/host/machines-health.js';
import { defaultVersionProbe } from '../../src/provision/artifacts/version-check.js';

const runner = createExecaRunner();
const attempt = async (): Promise<Record<string, unknown>> => {
  try {
    const r = await runner.run('true', []);
    return { ok: true, exitCode: r.exitCode };
  } catch (err) {
    const e = err as Error & { code?: string; cause?: { code?: string } };
    return {
      ok: false,
      code: e.code,
      causeCode: e.cause?.code,
      reserve: exhaustion(err),
      message: e.message,
    };
  }
};

const fds: number[] = [];
try {
  for (;;) fds.push(openSync('/dev/null', 'r'));
} catch {
  // every descriptor taken
}
process.stdout.write(`${JSON.stringify(await attempt())}\n`);
// The kubelet check without a descriptor for its socket: unknown (a throw), never unhealthy.
const health = await createHttpKubeletHealthCheck('http://127.0.0.1:9/healthz')('kube1').then(
  (healthy) => ({ healthy }),
  (err: NodeJS.ErrnoException) => ({ threw: err.code }),
);
process.stdout.write(`${JSON.stringify(health)}\n`);
// The version probe without descriptors: a thrown EMFILE, never "not installed" (null).
const probe = await defaultVersionProbe(process.execPath).then(
  (output) => ({ output }),
  (err: NodeJS.ErrnoException) => ({ threw: err.code }),
);
process.stdout.write(`${JSON.stringify(probe)}\n`);
for (const fd of fds.splice(0, 32)) closeSync(fd);
process.stdout.write(`${JSON.stringify(await attempt())}\n`);
for (const fd of fds) closeSync(fd);
