/**
 * agentd's parts as the daemon assembles them (src/daemon/assembly.ts, `assembleDaemon`), on the
 * engine fixture's fake host (machines and provisioner that record every call) under a temp dir:
 * for tests that go the way a call goes — the dispatcher (or the admin app's `/rpc` route), a
 * method, a port of the engine — without a copy of the wiring of their own.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { assembleDaemon, type Assembly, type AssemblyOptions } from '../../../src/daemon/assembly.js';
import type { Host } from '../../../src/daemon/host.js';
import { loadDaemonConfig } from '../../../src/config/load-config.js';
import type { CommandRunner } from '../../../src/host/types.js';
import { config, createEngineFixture, silentLogger, type EngineFixture } from '../engine/fakes.js';

export interface Assembled extends Assembly {
  /** The fake host and the stores under the temp dir. */
  readonly f: EngineFixture;
  /** Stop what the test started: the Kubernetes wiring, the engine, the reserve. */
  close(): Promise<void>;
}

/** No host command runs in these tests: the machine manager and the provisioner are fakes. */
const noCommands: CommandRunner = {
  run: (file, args) => Promise.reject(new Error(`no host commands in this test: ${file} ${args.join(' ')}`)),
};

export interface AssembledOptions {
  /** Daemon flags beside the paths under the temp dir (kubeconfig, machineName, watch …). */
  flags?: Record<string, unknown>;
  /** The name the fake host's default config joins with. */
  machineName?: string;
  kube?: AssemblyOptions['kube'];
}

export async function assembled(o: AssembledOptions = {}): Promise<Assembled> {
  const f = await createEngineFixture();
  // As the daemon's start prepares it before the assembly (src/daemon/state-dir.ts).
  await mkdir(f.stateDir, { recursive: true, mode: 0o700 });
  const daemonConfig = loadDaemonConfig({
    flags: {
      socket: path.join(f.dir, 'agentd.sock'),
      pidFile: path.join(f.dir, 'agentd.pid'),
      stateDir: f.stateDir,
      root: path.join(f.dir, 'root'),
      host: 'sim',
      repair: false,
      ...o.flags,
    },
    env: {},
    cwd: f.dir,
    isTTY: false,
    defaultConfigFile: path.join(f.dir, 'no-config.yaml'),
  });
  const host: Host = {
    runner: noCommands,
    machines: f.machines,
    memAvailable: async () => 16 * 1024 ** 3,
    defaultConfig: () => config(o.machineName ? { MachineName: o.machineName } : {}),
    close: async () => undefined,
  };
  const a = assembleDaemon({
    config: daemonConfig,
    host,
    logger: silentLogger,
    clock: f.clock,
    env: {},
    provisioner: f.provisioner,
    metrics: f.metrics,
    // An engine nobody closes must hold no FileHandle (Node 26 crashes on a collected one).
    reserveDescriptors: 0,
    kube: o.kube,
  });
  return {
    ...a,
    f,
    close: async () => {
      await a.kube.stop();
      await a.engine.shutdown(0);
      await a.engine.reserve.close();
    },
  };
}
