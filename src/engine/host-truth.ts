/**
 * Trust the host over the files (docs/architecture.md, "Recovery checks"): before a destructive
 * step — stopping or removing a machine, deleting its applied config — what agentd's state files
 * claim (node.json, the journal, the applied configs) is checked against what the host shows
 * (which machine runs and serves) and against each other. A machine that serves the node is
 * never stopped or removed on a file's word alone.
 */
import { AgentError, describeError } from '../errors.js';
import type { MachineInspection, MachineManager } from '../host/machines.js';
import { alternateMachine, MACHINE_NAMES, type MachineName } from '../host/types.js';
import type { Journal } from './journal.js';
import type { StateReserve } from './reserve.js';
import type { ConflictAgainst } from './warnings.js';

/** One machine as the host shows it. */
export interface MachineFacts {
  name: MachineName;
  /** False when the host could not be asked (then nothing about it is assumed). */
  known: boolean;
  /** machined knows it, or its rootfs is on disk. */
  exists: boolean;
  running: boolean;
  /** Running, kubelet active and its health endpoint answers: it serves the node. */
  serving: boolean;
  /** Why it is not known (`known: false`). */
  error?: string;
}

export type HostFacts = Record<MachineName, MachineFacts>;

export interface ObserveOptions {
  /** Whether the machine's rootfs is on disk (default: every machine is taken to exist). */
  onDisk?: (m: MachineName) => Promise<boolean>;
  /** Inspections that fail for want of descriptors are tried again on the reserve. */
  reserve?: StateReserve;
  signal?: AbortSignal;
}

export function factsOf(info: MachineInspection, onDisk: boolean): MachineFacts {
  return {
    name: info.name,
    known: true,
    exists: info.registered || info.running || onDisk,
    running: info.running,
    serving: info.running && info.kubelet === 'active' && info.healthy,
  };
}

/** A machine the host could not be asked about: nothing about it is assumed (it may run and serve). */
export function unknownFacts(m: MachineName, error: string): MachineFacts {
  return { name: m, known: false, exists: true, running: true, serving: true, error };
}

/**
 * The facts of an inspection as it came back: one whose host commands failed (kubelet
 * `unknown`, not running) could not ask, and says nothing.
 */
export function inspectedFacts(info: MachineInspection, onDisk: boolean): MachineFacts {
  if (info.kubelet === 'unknown' && !info.running) {
    return unknownFacts(info.name, `inspect ${info.name}: the host did not answer`);
  }
  return factsOf(info, onDisk);
}

/** Ask the host about one machine; one that cannot be asked is `known: false`. Never throws. */
export async function observeMachine(
  machines: Pick<MachineManager, 'inspect'>,
  m: MachineName,
  o: ObserveOptions = {},
): Promise<MachineFacts> {
  try {
    const inspect = (): Promise<MachineInspection> => machines.inspect(m, o.signal);
    let info = await (o.reserve ? o.reserve.retry(inspect) : inspect());
    // An inspection that could not ask (kubelet `unknown`: the host commands failed, as they
    // do with no descriptor left) is asked once more on the descriptor reserve.
    if (info.kubelet === 'unknown' && o.reserve && (await o.reserve.release('descriptors'))) {
      try {
        info = await inspect();
      } finally {
        await o.reserve.ensure();
      }
    }
    // Without a way to look at the disk, a machine is taken to exist (nothing is assumed gone).
    const disk = info.registered || info.running || !o.onDisk ? true : await o.onDisk(m).catch(() => true);
    return inspectedFacts(info, disk);
  } catch (err) {
    return unknownFacts(m, describeError(err));
  }
}

/** Ask the host about both machines (see `observeMachine`). Never throws. */
export async function observeHost(
  machines: Pick<MachineManager, 'inspect'>,
  o: ObserveOptions = {},
): Promise<HostFacts> {
  const out = {} as HostFacts;
  for (const m of MACHINE_NAMES) out[m] = await observeMachine(machines, m, o);
  return out;
}

/**
 * Stop `m` and make sure it no longer runs: a stop that reports success while the host could not
 * act (no descriptor left for its commands) is tried again on the descriptor reserve.
 */
export async function stopConfirmed(
  machines: Pick<MachineManager, 'inspect' | 'stop'>,
  m: MachineName,
  o: ObserveOptions = {},
): Promise<void> {
  const stop = (): Promise<void> => machines.stop(m);
  for (let attempt = 0; attempt < 2; attempt++) {
    await (o.reserve ? o.reserve.retry(stop) : stop());
    const f = await observeMachine(machines, m, o);
    if (f.known && !f.running) return;
    if (attempt === 0 && !(o.reserve && (await o.reserve.release('descriptors')))) break;
  }
  await o.reserve?.ensure();
  throw new AgentError('COMMAND_FAILED', `stop ${m}: the machine still runs after it was stopped`, {
    data: { machine: m },
  });
}

/** The machine that serves the node, when exactly one does. */
export function servingMachine(facts: HostFacts): MachineName | null {
  const serving = MACHINE_NAMES.filter((m) => facts[m].known && facts[m].serving);
  return serving.length === 1 ? (serving[0] as MachineName) : null;
}

/** One sentence of what serves: for the end of every operation's error ("the node: kube1 serves"). */
export function describeNode(facts: HostFacts): string {
  const serving = servingMachine(facts);
  const others = MACHINE_NAMES.filter((m) => m !== serving).map((m) => {
    const f = facts[m];
    if (!f.known) return `${m} unknown (${f.error ?? 'cannot be inspected'})`;
    return `${m} ${f.serving ? 'serving' : f.running ? 'running, not serving' : f.exists ? 'stopped' : 'absent'}`;
  });
  return serving !== null
    ? `the node: ${serving} serves (${others.join(', ')})`
    : `the node: no machine serves (${others.join(', ')})`;
}

/**
 * Why `m` must not be stopped, removed or lose its applied config now, or null when it may:
 * it serves the node and the other machine does not (or the host cannot say).
 * `neverStarted`: this operation never started `m` (a target before the switch-over): then any
 * running `m` is not agentd's to stop.
 */
export function refuseDestroy(
  m: MachineName,
  facts: HostFacts,
  o: { neverStarted?: boolean } = {},
): string | null {
  const f = facts[m];
  const other = facts[alternateMachine(m)];
  if (!f.known) return `the host cannot say whether ${m} runs (${f.error ?? 'inspect failed'})`;
  if (o.neverStarted && f.running) {
    return `${m} runs${f.serving ? ' and serves the node' : ''}, and this operation never started it`;
  }
  if (f.serving && !(other.known && other.serving)) {
    return `${m} runs and serves the node, and ${other.name} does not`;
  }
  return null;
}

/** What a state file claims about one machine's applied config. */
export type AppliedState = 'verified' | 'unverified' | 'missing' | 'unreadable';

/** What the state files claim, read as they are. */
export interface StateClaims {
  /** node.json's active machine; undefined when there is no node.json. */
  nodeActive: MachineName | null | undefined;
  journal: Journal | null;
  applied: Record<MachineName, AppliedState>;
}

/** A state file that disagrees with the host or with another file. */
export interface Disagreement {
  /** The file that disagrees: `node.json` or `journal.json`. */
  file: string;
  /** What it disagrees with: the host's machines, node.json, or the applied configs. */
  against: ConflictAgainst;
  message: string;
  /** The machine the host says serves, when one does. */
  serving: MachineName | null;
}

/**
 * Every disagreement between the files and the host, and between the files, that would make
 * agentd act on the wrong machine. Only machines the host could be asked about are judged.
 */
export function checkStateFiles(claims: StateClaims, facts: HostFacts): Disagreement[] {
  const out: Disagreement[] = [];
  const serving = servingMachine(facts);
  const add = (file: string, against: ConflictAgainst, message: string): void =>
    void out.push({ file, against, message, serving });
  const active = claims.nodeActive;
  if (active) {
    const f = facts[active];
    const other = facts[alternateMachine(active)];
    // An update provisions over the other machine: never while that one runs.
    if (f.known && !f.running && other.known && other.running) {
      const runs = other.serving ? 'runs and serves' : 'runs';
      add(
        'node.json',
        'host',
        f.exists
          ? `node.json names ${active} as the active machine, but ${active} is stopped and ${other.name} ${runs}`
          : `node.json names ${active} as the active machine, but the host has no machine ${active} and ${other.name} ${runs}`,
      );
    } else if (claims.applied[active] === 'missing') {
      add(
        'node.json',
        'applied-config',
        `node.json names ${active} as the active machine, but ${active} has no applied config`,
      );
    }
  }
  const j = claims.journal;
  if (j && j.kind === 'update') {
    if (j.closed && j.committed && j.target && active && active !== j.target && j.outcome === 'succeeded') {
      add(
        'journal.json',
        'node.json',
        `journal.json says the last update committed ${j.target}, but node.json names ${active}`,
      );
    }
    if (!j.closed) {
      // An open journal: recovery is about to act on it.
      const winner = j.committed ? j.target : j.source;
      const loser = winner ? alternateMachine(winner) : null;
      if (winner && facts[winner].known && !facts[winner].exists && claims.applied[winner] === 'missing') {
        const keep =
          loser && facts[loser].known && facts[loser].serving ? `, and ${loser} runs and serves` : '';
        add(
          'journal.json',
          'host',
          `the open journal.json names ${winner} as the ${j.committed ? 'committed target' : 'source'}, but the host has no machine ${winner} and no applied config of it${keep}`,
        );
      }
    }
  }
  return out;
}
