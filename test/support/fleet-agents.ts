/**
 * Agents of the fleet simulation (test/integration/fleet-simulation.test.ts), each the real
 * assembly a node runs, in process: `startDaemon` (the daemon's own wiring: engine, Machine
 * watcher, fleet runtime) on the simulated host (`--host sim`) under its own temp `--root`, with
 * `--kubeconfig` pointing at one shared fake API server (or, with `identities`, the real control
 * plane, test/cluster/fleet.test.ts) and its own token (so the server can tell the agents'
 * requests apart). One shared artifact mirror serves every agent's downloads.
 *
 * The simulated host's command runner is observed: an agent is **down** from the moment its
 * host is asked to stop kubelet in the serving machine until the old machine is removed (cleanup,
 * after commit) or started again (rollback) — a window that contains "between stop and commit".
 * An agent can be **frozen** (as by SIGSTOP, or a kill that leaves the node as it is): every host
 * command hangs and the API server refuses its token, so it neither renews nor frees its slot.
 */
import { existsSync } from 'node:fs';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadDaemonConfig } from '../../src/config/load-config.js';
import { CleanupStack } from '../../src/daemon/cleanup-stack.js';
import { startDaemon, type Daemon, type DaemonDeps } from '../../src/daemon/daemon.js';
import { createHost } from '../../src/daemon/host-wiring.js';
import { systemClock } from '../../src/host/clock.js';
import type { CommandResult, CommandRunner, RunOptions } from '../../src/host/types.js';
import { createRpcClient, type RpcClient } from '../../src/rpc/client.js';
import { createInProcessTransport } from '../../src/rpc/in-process-transport.js';
import { simDefaultConfig } from '../../src/sim/default-config.js';
import type { Mirror } from '../../src/sim/mirror/index.js';
import type { FakeKube } from './fake-kube.js';

const logger = pino({ level: 'silent' });
/**
 * Agents live in memory when the host has /dev/shm: 60 repaves journal every phase with fsync,
 * which on a shared disk was a third of the simulation's time.
 */
const BASE_DIR = existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();

/** Counts the agents that are down now and the most seen down at once. */
export class DownCounter {
  readonly down = new Set<string>();
  max = 0;
  /** When each agent last went down (ms, wall clock). */
  readonly wentDownAt = new Map<string, number>();

  enter(name: string): void {
    this.down.add(name);
    this.wentDownAt.set(name, Date.now());
    this.max = Math.max(this.max, this.down.size);
  }
  leave(name: string): void {
    this.down.delete(name);
  }
}

export interface FleetAgent {
  readonly name: string;
  readonly dir: string;
  readonly daemon: Daemon;
  /** The daemon's API, in process (as the watcher calls it). */
  readonly rpc: RpcClient;
  /** Host commands hang and the API server refuses this agent's token, until `stop`. */
  freeze(): void;
  /** Freeze the moment the agent goes down (killed between stop and commit). */
  freezeWhenDown(): void;
  readonly frozen: boolean;
  stop(): Promise<void>;
}

/** A temp dir holding a node joined on the simulated host (kube1 active), its daemon stopped. */
export async function createJoinedTemplate(mirror: Mirror): Promise<string> {
  const dir = await mkdtemp(path.join(BASE_DIR, 'agentd-fleet-template-'));
  await writeFile(path.join(dir, 'config.yaml'), '');
  const daemon = await startDaemon(daemonConfig(dir, { name: 'template', kubeconfig: null }), { logger });
  try {
    const rpc = createRpcClient(createInProcessTransport(daemon.dispatcher, 'test'));
    const join = await rpc.call('update', { config: simDefaultConfig(mirror), wait: true });
    if (join.state !== 'succeeded') throw new Error(`the template join ended ${join.state}`);
  } finally {
    await daemon.stop('template joined');
  }
  return dir;
}

function daemonConfig(dir: string, o: { name: string; kubeconfig: string | null }) {
  return loadDaemonConfig({
    flags: {
      config: path.join(dir, 'config.yaml'),
      host: 'sim',
      socket: path.join(dir, 'agentd.sock'),
      pidFile: path.join(dir, 'agentd.pid'),
      stateDir: path.join(dir, 'state'),
      root: path.join(dir, 'root'),
      machineName: o.name,
      repair: false,
      shutdownGrace: '2s',
      ...(o.kubeconfig === null ? { watch: false } : { kubeconfig: o.kubeconfig }),
    },
    env: {},
    cwd: dir,
    isTTY: false,
  });
}

/**
 * Where an agent's identity comes from: a kubeconfig for it, and how to revoke it (a frozen
 * node's requests are then refused). The fake API server's tokens by default; the real control
 * plane's bootstrap tokens in test/cluster/fleet.test.ts.
 */
export interface FleetAgentIdentities {
  identity(name: string): Promise<{ kubeconfig: string; revoke(): void }>;
}

function fakeKubeIdentities(kube: FakeKube): FleetAgentIdentities {
  return {
    async identity(name) {
      const token = `${name}-${Math.random().toString(36).slice(2)}`;
      kube.setToken(token, { user: name, rules: [{ verbs: ['*'], resources: ['*'] }] });
      return {
        kubeconfig: kube.kubeconfigYaml(token),
        revoke: () => kube.setToken(token, { user: name, rules: [] }),
      };
    },
  };
}

export interface StartFleetAgentOptions {
  /** A dir from `createJoinedTemplate`: copied, so the agent starts as a joined node. */
  template: string;
  name: string;
  /** The fake API server the agent uses; or `identities` for another API server. */
  kube?: FakeKube;
  identities?: FleetAgentIdentities;
  counter: DownCounter;
  /** Watcher and fleet gate timing. */
  timing: NonNullable<DaemonDeps['kube']>;
}

export async function startFleetAgent(o: StartFleetAgentOptions): Promise<FleetAgent> {
  const dir = await mkdtemp(path.join(BASE_DIR, `agentd-fleet-${o.name}-`));
  await cp(o.template, dir, { recursive: true });
  const identities = o.identities ?? (o.kube ? fakeKubeIdentities(o.kube) : null);
  if (identities === null) throw new Error('startFleetAgent needs kube or identities');
  const id = await identities.identity(o.name);
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, id.kubeconfig);
  const config = daemonConfig(dir, { name: o.name, kubeconfig });

  let frozen = false;
  let freezeWhenDown = false;
  const freeze = (): void => {
    frozen = true;
    id.revoke();
  };
  const thaw = new AbortController();
  /** The machine whose kubelet was stopped while it served, while the node is down. */
  let stoppedSource: string | null = null;
  const observe = (sim: CommandRunner): CommandRunner => ({
    async run(file: string, args: readonly string[], options?: RunOptions): Promise<CommandResult> {
      if (frozen) {
        // A frozen node: the command never runs (until the test stops the agent).
        await new Promise<void>((resolve) => {
          const signals = [thaw.signal, options?.signal].filter((s) => s !== undefined);
          AbortSignal.any(signals).addEventListener('abort', () => resolve(), { once: true });
        });
        throw new Error(`${o.name} is frozen`);
      }
      const machine = /^--machine=(.+)$/.exec(args[0] ?? '')?.[1];
      if (
        stoppedSource === null &&
        file === 'systemd-run' &&
        machine !== undefined &&
        args.slice(-2).join(' ') === 'stop kubelet.service'
      ) {
        stoppedSource = machine;
        o.counter.enter(o.name);
        if (freezeWhenDown) {
          freeze();
          return this.run(file, args, options);
        }
      }
      const result = await sim.run(file, args, options);
      if (
        stoppedSource !== null &&
        file === 'machinectl' &&
        (args[0] === 'remove' || (args[0] === 'start' && args[1] === stoppedSource))
      ) {
        stoppedSource = null;
        o.counter.leave(o.name);
      }
      return result;
    },
  });
  const env = {};
  // FLEET_SIM_LOG_NODE=<name> logs that one agent (debugging the simulation).
  const log = process.env.FLEET_SIM_LOG_NODE === o.name ? pino({ level: 'debug' }) : logger;
  // What the host wiring brings up is taken down after the daemon stops (none without --sim).
  const hostCleanup = new CleanupStack(log);
  const host = await createHost(config, {
    logger: log,
    clock: systemClock,
    env,
    wrapRunner: observe,
    cleanup: hostCleanup,
  });
  const daemon = await startDaemon(config, { logger: log, host, env, kube: o.timing });
  const rpc = createRpcClient(createInProcessTransport(daemon.dispatcher, 'test'));
  let stopping: Promise<void> | null = null;
  return {
    name: o.name,
    dir,
    daemon,
    rpc,
    get frozen() {
      return frozen;
    },
    freeze,
    freezeWhenDown() {
      freezeWhenDown = true;
    },
    stop() {
      stopping ??= (async () => {
        thaw.abort();
        await daemon.stop('test done');
        await hostCleanup.unwind();
        await rm(dir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}
