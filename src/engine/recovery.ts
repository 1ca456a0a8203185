/**
 * Startup recovery (docs/architecture.md): read the journal — and nothing else — to drive the node to
 * exactly one active, verified machine after a crash. Uncommitted switch → back to the source;
 * committed → forward to the target; reset → finish it. The interrupted operation is marked
 * `interrupted` with what recovery did.
 */
import type { Logger } from 'pino';
import { RecoveryFailedError, describeError } from '../errors.js';
import { failpoint } from '../host/failpoints.js';
import type { MachineManager } from '../host/machines.js';
import { MACHINE_NAMES, type Clock, type MachineName } from '../host/types.js';
import type { AppliedConfigStore } from './applied-config-store.js';
import type { DeferredWrites } from './deferred-writes.js';
import { readJournal, type Journal } from './journal.js';
import { readNodeState, writeNodeStateOn } from './node-state.js';
import type { StateReserve } from './reserve.js';
import { writeJournalOn } from './switch-journal.js';
import type { OperationState } from './operation.js';
import type { OperationStore } from './operation-store.js';
import type { Provisioner } from '../provision/provisioner-contract.js';
import type { NodeDrainer } from './update.js';
import { recoverSwitch, type RecoveryAction } from './recovery-switch.js';
import type { StateConflictWarning } from './state-check.js';
import type { StatusWarning } from './warnings.js';

export type { RecoveryAction };

export interface RecoveryDeps {
  stateDir: string;
  machines: MachineManager;
  provisioner: Provisioner;
  applied: AppliedConfigStore;
  store: OperationStore;
  clock: Clock;
  logger: Logger;
  drainer: NodeDrainer | null;
  verifyTimeoutMs?: number;
  /** Space and descriptors held back for what recovery must write and do. */
  reserve?: StateReserve;
  /** Where writes that cannot be done now are owed. */
  deferred?: DeferredWrites;
  /** Whether a machine's rootfs is on disk. */
  onDisk?: (m: MachineName) => Promise<boolean>;
}

export interface RecoveryReport {
  operationId: string | null;
  outcome: string;
  activeMachine: MachineName | null;
  actions: RecoveryAction[];
  ok: boolean;
  /** The interrupted operation's cordon is still on the node: agentd uncordons once it can. */
  uncordonPending: boolean;
  /** State files recovery found disagreeing with the host, and what it did about each. */
  conflicts: StateConflictWarning[];
}

/** What `status` warns of startup recovery: that it failed, and the files it did not follow. */
export function recoveryWarnings(report: RecoveryReport | null): StatusWarning[] {
  if (report === null) return [];
  const failed: StatusWarning[] = report.ok
    ? []
    : [
        {
          code: 'recovery-failed',
          operationId: report.operationId,
          message: `startup recovery: ${report.outcome}`,
        },
      ];
  return [...failed, ...report.conflicts];
}

/** What startup recovery did, and the journal as recovery left it (closed, once it ran). */
export interface RecoveryResult {
  report: RecoveryReport | null;
  journal: Journal | null;
}

/** Read the journal on the reserve: recovery runs when descriptors or space may be out. */
export function readJournalOn(d: Pick<RecoveryDeps, 'stateDir' | 'reserve'>): Promise<Journal | null> {
  const read = (): Promise<Journal | null> => readJournal(d.stateDir);
  return d.reserve ? d.reserve.retry(read) : read();
}

/**
 * Startup recovery. `journal` is the journal as the engine read it (read here when not given):
 * it is read once, and what recovery writes is kept in memory, so that nothing after it reads
 * the file again while the descriptors may still be out (the daemon would fail to start).
 */
export async function recover(d: RecoveryDeps, journal?: Journal | null): Promise<RecoveryResult> {
  const found = journal === undefined ? await readJournalOn(d) : journal;
  const recovered = await recoverJournal(d, found);
  const final = recovered.journal ?? found;
  await closeUnjournaled(d, final);
  return { report: recovered.report, journal: final };
}

async function recoverJournal(
  d: RecoveryDeps,
  journal: Journal | null,
): Promise<{ report: RecoveryReport | null; journal: Journal | null }> {
  if (!journal || journal.closed) return { report: await takeover(d), journal: null };
  const log = d.logger.child({ recovery: journal.operationId });
  log.warn({ journal }, 'found an open journal: the daemon stopped during an operation; recovering');
  failpoint('recovery.start');
  const actions: RecoveryReport['actions'] = [];
  const step = async (name: string, fn: () => Promise<void>): Promise<boolean> => {
    try {
      await (d.reserve ? d.reserve.retry(fn) : fn());
      actions.push({ step: name, ok: true });
      return true;
    } catch (err) {
      actions.push({ step: name, ok: false, error: describeError(err) });
      log.error({ step: name, err: describeError(err) }, 'recovery step failed');
      return false;
    }
  };
  const removeMachine = async (m: MachineName): Promise<void> => {
    await step(`stop ${m}`, () => d.machines.stop(m));
    await step(`remove ${m}`, () => d.machines.remove(m));
    await step(`remove ${m} nspawn files`, () => d.provisioner.removeMachineFiles(m));
    await step(`remove ${m} applied config`, () => d.applied.remove(m));
  };
  const bringUp = async (m: MachineName): Promise<boolean> => {
    let info: Awaited<ReturnType<typeof d.machines.inspect>>;
    try {
      const inspect = (): ReturnType<typeof d.machines.inspect> => d.machines.inspect(m);
      info = await (d.reserve ? d.reserve.retry(inspect) : inspect());
    } catch (err) {
      actions.push({ step: `inspect ${m}`, ok: false, error: describeError(err) });
      info = { name: m, registered: false, running: false, kubelet: 'unknown', healthy: false };
    }
    if (!info.running) {
      if (!(await step(`start ${m}`, () => d.machines.start(m)))) return false;
    }
    if (info.kubelet !== 'active') {
      if (!(await step(`start services in ${m}`, () => d.machines.startServices(m)))) return false;
    }
    return step(`verify ${m}`, () => d.machines.verify(m, { timeoutMs: d.verifyTimeoutMs }));
  };
  const now = (): Date => new Date(d.clock.now());

  let outcome: string;
  let active: MachineName | null;
  let ok: boolean;
  const conflicts: StateConflictWarning[] = [];
  if (journal.kind === 'reset') {
    for (const m of MACHINE_NAMES) await removeMachine(m);
    await step('daemon-reload', () => d.machines.daemonReload());
    active = null;
    ok = actions.every((a) => a.ok);
    outcome = ok
      ? 'finished the reset: both machines removed'
      : 'tried to finish the reset; some steps failed';
  } else {
    const r = await recoverSwitch(d, journal, { step, removeMachine, bringUp, actions, log });
    ({ outcome, active, ok } = r);
    if (r.conflict) conflicts.push(r.conflict);
    ok = ok && actions.every((a) => a.ok || a.refused === true);
  }
  // The uncordon never decides whether recovery worked (the node serves either way), but it is
  // never dropped: when the Kubernetes API cannot be reached yet (recovery runs before the
  // client and the applied config's credentials are loaded), it stays pending in the closed
  // journal and agentd does it once ready (`Engine.completePendingUncordon`).
  let uncordonPending = false;
  if (journal.cordonedByUs || journal.uncordonPending === true) {
    const drainer = d.drainer;
    if (drainer) {
      uncordonPending = !(await step('uncordon', () => drainer.uncordon()));
      if (uncordonPending) (actions.at(-1) as RecoveryAction).deferred = true;
    } else {
      uncordonPending = true;
      actions.push({
        step: 'uncordon',
        ok: false,
        deferred: true,
        error: UNCORDON_DEFERRED,
      });
    }
    if (uncordonPending) log.warn('the node stays cordoned until agentd can reach the Kubernetes API');
  }
  // What recovery must write goes on the reserve, and is owed when even that fails: the node
  // was brought back either way.
  failpoint('recovery.record.before');
  await writeNodeStateOn(d.stateDir, active, now(), d);
  await markInterrupted(d, journal, { outcome, actions, activeMachine: active, ok, uncordonPending });
  // Written, or owed (deferred) when even the reserve did not do: either way this is the journal.
  const closed: Journal = {
    ...journal,
    uncordonPending,
    closed: true,
    outcome: `interrupted: ${outcome}`,
    updatedAt: now().toISOString(),
  };
  await writeJournalOn(d.stateDir, closed, { reserve: d.reserve, deferred: d.deferred, mode: 'best-effort' });
  log.warn({ outcome, activeMachine: active, ok, uncordonPending }, 'recovery finished');
  const report: RecoveryReport = {
    operationId: journal.operationId,
    outcome,
    activeMachine: active,
    actions,
    ok,
    uncordonPending,
    conflicts,
  };
  return { report, journal: closed };
}

/** Why a recovery's uncordon is deferred (its action's `error`). */
export const UNCORDON_DEFERRED =
  'the Kubernetes API is not available during startup recovery: the node stays cordoned until agentd uncordons it once ready (or run agentctl uncordon)';

async function markInterrupted(
  d: RecoveryDeps,
  journal: Journal,
  r: {
    outcome: string;
    actions: RecoveryReport['actions'];
    activeMachine: MachineName | null;
    ok: boolean;
    uncordonPending: boolean;
  },
): Promise<void> {
  const op = d.store.get(journal.operationId);
  if (!op) return;
  op.state = 'interrupted';
  op.finishedAt = new Date(d.clock.now()).toISOString();
  for (const p of op.phases) {
    if (p.state === 'running') {
      p.state = 'failed';
      p.finishedAt = op.finishedAt;
      p.error = { code: 'CANCELLED', message: 'agentd stopped during this phase' };
    } else if (p.state === 'pending') {
      p.state = 'skipped';
    }
  }
  op.result = {
    ...(op.result ?? {}),
    recovery: {
      interruptedIn: journal.phase,
      outcome: r.outcome,
      activeMachine: r.activeMachine,
      actions: r.actions,
      ...(r.uncordonPending ? { uncordonPending: true } : {}),
    },
  };
  op.error = r.ok
    ? null
    : {
        code: 'RECOVERY_FAILED',
        message: new RecoveryFailedError(r.outcome).message,
        data: { actions: r.actions },
      };
  await d.store.record(op);
}

/** The ends of an operation a closed journal can name (`interrupted: …` is recovery's own). */
const ENDED_STATES: ReadonlySet<string> = new Set(['succeeded', 'failed', 'rolled_back', 'cancelled']);

/** What recovery did about an operation the journal does not cover, by kind (a verb phrase). */
const UNJOURNALED_OUTCOME: Record<string, string> = {
  repair:
    'left the node as it was (a repair only starts the active machine); agentd checks the node again and repairs it if it still does not serve',
  drain:
    'left the node as it was: it stays cordoned, drained as far as the drain got; run agentctl uncordon to undo it',
  uncordon: 'left the node as it was; run agentctl uncordon again if the node is still cordoned',
};

/**
 * Operations that never write the switch-over journal (repair, drain, uncordon) change no
 * machine assignment, so recovery has nothing to drive; but one that was running when agentd
 * stopped must not stay `running` in the history forever. Each is marked `interrupted`, with
 * what recovery did (nothing) and what that means, like a journaled one. So is an update or
 * reset whose journal closed just before agentd stopped, before its record was saved.
 */
async function closeUnjournaled(d: RecoveryDeps, journal: Journal | null): Promise<void> {
  const finishedAt = new Date(d.clock.now()).toISOString();
  const open = d.store.list().filter((op) => op.state === 'running' || op.state === 'pending');
  if (open.length === 0) return;
  const read = (): ReturnType<typeof readNodeState> => readNodeState(d.stateDir);
  const activeMachine = (await (d.reserve ? d.reserve.retry(read) : read()))?.activeMachine ?? null;
  for (const op of open) {
    const interruptedIn = op.phases.find((p) => p.state === 'running')?.name ?? null;
    // Its journal closed, but agentd stopped before the record said so.
    const closedJournal = journal?.operationId === op.id && journal.closed ? journal : null;
    // The journal has the operation's true end (written on the reserve when the disk was full):
    // the record, which agentd could not write, gets it now.
    const ended = closedJournal?.outcome ?? '';
    const trueEnd = ENDED_STATES.has(ended) ? (ended as OperationState) : null;
    const outcome = trueEnd
      ? `recorded its end (${trueEnd}) from the journal: agentd stopped before the record was written`
      : closedJournal
        ? `found its journal closed (${closedJournal.outcome ?? 'no outcome'}) and left the node as it was`
        : (UNJOURNALED_OUTCOME[op.kind] ?? 'found no journal of it and left the node as it was');
    op.state = trueEnd ?? 'interrupted';
    op.finishedAt = finishedAt;
    for (const p of op.phases) {
      if (p.state === 'running') {
        p.state = 'failed';
        p.finishedAt = finishedAt;
        p.error = trueEnd
          ? { code: 'INTERNAL', message: 'the end of this phase was not recorded before agentd stopped' }
          : { code: 'CANCELLED', message: 'agentd stopped during this phase' };
      } else if (p.state === 'pending') {
        p.state = 'skipped';
      }
    }
    op.result = {
      ...(op.result ?? {}),
      recovery: { interruptedIn, outcome, activeMachine, actions: [] },
    };
    d.logger.warn(
      { operation: op.id, kind: op.kind, interruptedIn },
      `closed an interrupted ${op.kind}: ${outcome}`,
    );
    await d.store.record(op);
  }
}

/**
 * A node without an open journal. When no node state exists yet (a node taken over from the
 * upstream agent) and both machines have applied configs, the running, healthy one is active —
 * decided from the host, never from which file is found first.
 */
async function takeover(d: RecoveryDeps): Promise<RecoveryReport | null> {
  if (await readNodeState(d.stateDir)) return null;
  const present: MachineName[] = [];
  for (const m of MACHINE_NAMES) {
    try {
      if (await d.applied.read(m)) present.push(m);
    } catch {
      present.push(m);
    }
  }
  if (present.length < 2) return null;
  const healthy: MachineName[] = [];
  for (const m of present) {
    const info = await d.machines.inspect(m);
    if (info.running && info.kubelet === 'active') healthy.push(m);
  }
  if (healthy.length !== 1) {
    d.logger.warn(
      { present, healthy },
      'both machines have applied configs and the host does not say which one serves',
    );
    return null;
  }
  const active = healthy[0] as MachineName;
  await writeNodeStateOn(d.stateDir, active, new Date(d.clock.now()), d);
  d.logger.warn({ active }, 'took over a node with two applied configs: the running machine is active');
  return {
    operationId: null,
    outcome: `took over: ${active} is the running machine`,
    activeMachine: active,
    actions: [],
    ok: true,
    uncordonPending: false,
    conflicts: [],
  };
}
