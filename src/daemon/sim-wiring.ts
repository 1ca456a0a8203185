/**
 * The simulated host of `--host sim` and, with `--sim`, the local artifact mirror and the
 * default config that joins a fresh node from it. Loaded by host-wiring.ts only in those modes.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { DaemonConfig } from '../config/daemon-config.js';
import { describeError, PreconditionFailedError } from '../errors.js';
import { stateWriteError, writeFileAtomic } from '../host/fs-atomic.js';
import { createMachineManager } from '../host/machines.js';
import type { HostPaths } from '../host/paths.js';
import { simDefaultConfig } from '../sim/default-config.js';
import { parseSimFaults, simMemAvailable } from '../sim/faults.js';
import { createSimHost } from '../sim/host/index.js';
import { startMirror, type Mirror } from '../sim/mirror/index.js';
import type { Host, HostWiringDeps } from './host.js';

/**
 * The mirror keeps its port across restarts (recorded in the state dir), because the applied
 * config of a `--sim` node points its downloads and image at it. Its clean-up step is pushed as
 * soon as it listens: recording the port may still fail.
 */
async function startSimMirror(
  stateDir: string,
  logger: Logger,
  cleanup: HostWiringDeps['cleanup'],
): Promise<Mirror> {
  const file = path.join(stateDir, 'sim-mirror.json');
  let port = 0;
  try {
    port = (JSON.parse(await readFile(file, 'utf8')) as { port: number }).port;
  } catch {
    port = 0;
  }
  let mirror: Mirror;
  try {
    mirror = await startMirror({ port, logger });
  } catch (err) {
    logger.warn({ port, err: (err as Error).message }, 'the sim mirror port is taken; using a new one');
    mirror = await startMirror({ logger });
  }
  cleanup.push('close the sim mirror', () => mirror.close());
  if (mirror.port !== port) {
    await writeFileAtomic(file, `${JSON.stringify({ port: mirror.port })}\n`, { dirMode: 0o700 }).catch(
      (err: unknown) => {
        throw stateWriteError(err, file);
      },
    );
  }
  return mirror;
}

/** The host files a simulated root needs that a real host always has; a failure names `--root`. */
async function seedSimRoot(root: string): Promise<void> {
  try {
    await mkdir(path.join(root, 'etc'), { recursive: true });
    for (const [name, content] of [
      ['etc/hostname', 'sim-host\n'],
      ['etc/resolv.conf', '# agentd --sim\nnameserver 127.0.0.1\n'],
    ] as const) {
      await writeFile(path.join(root, name), content, { flag: 'wx' }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
    }
  } catch (err) {
    throw new PreconditionFailedError(
      `--root ${root}: cannot set up the simulated host: ${describeError(err)}`,
      {
        cause: err,
        data: { option: 'root' },
      },
    );
  }
}

export async function createSimWiring(
  config: DaemonConfig,
  deps: HostWiringDeps,
  paths: HostPaths,
): Promise<Host> {
  const { logger } = deps;
  await seedSimRoot(config.root);
  const faults = deps.env.AGENTD_SIM_FAULTS ? parseSimFaults(deps.env.AGENTD_SIM_FAULTS) : [];
  const sim = createSimHost({ root: config.root, faults, clock: deps.clock, logger });
  const runner = deps.wrapRunner?.(sim) ?? sim;
  const machines = createMachineManager({
    runner,
    paths,
    clock: deps.clock,
    logger,
    kubeletHealth: sim.kubeletHealthy,
    // The simulated host answers at once: poll it tightly so a try-out update takes seconds,
    // and give up on a kubelet that never comes up within seconds, not minutes.
    timeouts: { pollIntervalMs: 50, verifyMs: 3000, startMs: 10_000, stopMs: 10_000 },
  });
  const mirror = config.sim ? await startSimMirror(config.stateDir, logger, deps.cleanup) : null;
  return {
    runner,
    machines,
    memAvailable: async () => simMemAvailable(faults),
    defaultConfig: mirror ? () => simDefaultConfig(mirror) : null,
    // The mirror has a clean-up step of its own (startSimMirror).
    close: async () => undefined,
  };
}
