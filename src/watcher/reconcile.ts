/**
 * One reconcile of the node's Machine (docs/watcher.md), from the Machine as the watch delivered it
 * (a read when there is no cache) and the applied config as last read (again after every
 * operation's end): decide whether the Machine asks for a repave or an update; if so start `update`
 * through the rpc client, mark the Machine `Provisioning` + `NodeUpdated=False/InProgress`, wait
 * for the end, then write the outcome — `Joining`, the counter acknowledged and
 * `NodeUpdated=True/Succeeded`, or `Failed` and `NodeUpdated=False/Failed`.
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { raceAbort } from '../retry/backoff.js';
import type { Machine, MachineApi } from '../kube/index.js';
import { RpcError } from '../rpc/client.js';
import type { RpcClient } from '../rpc/client.js';
import type { MethodTypes } from '../rpc/methods/index.js';
import { blocksRequest, createMemoryBlockedTargetStore, describeBlock } from './blocked-target.js';
import type { BlockedTarget, BlockedTargetStore } from './blocked-target.js';
import { decideMachine, describeDecision, readAppliedView } from './machine-goal.js';
import type { AppliedView, MachineDecision } from './machine-goal.js';
import {
  MESSAGE_PREFIX,
  clip,
  nodeUpdatedCondition,
  readObservedStatus,
  statusMutation,
} from './machine-status-writes.js';
import type { WantedStatus } from './machine-status-writes.js';
import { childLogger } from '../log.js';
import type { MachineCache } from './machine-cache.js';
import { reportWaits } from './wait-reporter.js';

type Operation = MethodTypes['update']['result'];

/** What a reconcile found or did. */
export type ReconcileOutcome =
  /** Nothing to do: the node runs what the Machine asks for. */
  | 'in-sync'
  /** The node has no applied config yet: the watcher does not drive a join. */
  | 'not-joined'
  /** The Machine does not exist (it is created only when the watcher starts). */
  | 'missing'
  /** Another operation holds the node: look again later. */
  | 'busy'
  | 'updated'
  | 'failed'
  /** This exact request already failed and was reported; wait for the Machine to change. */
  | 'already-failed'
  /** This target rolled back (or failed) here before: not applied again until the Machine asks anew. */
  | 'blocked';

export interface ReconcileResult {
  outcome: ReconcileOutcome;
  requeueAfterMs?: number;
  operationId?: string;
}

export interface ReconcilerOptions {
  name: string;
  machines: Pick<MachineApi, 'getMachine' | 'patchMachineStatus'>;
  rpc: RpcClient;
  clock: Clock;
  logger: Logger;
  /** Look again this long after finding the node busy (default 250 ms after it became free). */
  busyRequeueMs?: number;
  /** How long one `operations.wait` for a foreign operation may take (default 30 s). */
  busyWaitSeconds?: number;
  /** Attempts in all of an update that an earlier daemon's shutdown or crash ended (default 3). */
  maxAttempts?: number;
  /** How often a running update is looked at for a wait to show on the Machine (default 2 s). */
  waitPollMs?: number;
  /** The durable record of a target that rolled back or failed (default: in memory only). */
  blocked?: BlockedTargetStore;
  /** Told the blocked target (or null) whenever a reconcile has looked at it (`status` shows it). */
  onBlocked?: (block: BlockedTarget | null) => void;
  /**
   * The Machine as the watch delivers it: a reconcile starts from it, and a status write from it,
   * instead of a read (default: none, every reconcile and write reads the Machine first).
   */
  cache?: MachineCache;
}

export interface Reconciler {
  reconcile(signal: AbortSignal): Promise<ReconcileResult>;
  /**
   * An operation ended: the applied config may have changed. The next reconcile asks the engine
   * for it again; until then it is not asked again (only an operation changes it).
   */
  appliedMayHaveChanged(): void;
  /** The resourceVersion of the Machine the last reconcile read; null before one, or when there was none. */
  lastReadResourceVersion(): string | null;
}

/** An operation in a final state (not pending, not running). */
const hasEnded = (op: Operation): boolean => op.state !== 'pending' && op.state !== 'running';

const RETRYABLE_RPC_CODES = new Set(['DRAINING', 'UNAVAILABLE', 'INTERNAL']);
const FAILED_KEYS_KEPT = 32;

/** `phase: Failed`, agentd's message and `NodeUpdated=False/<reason>` with the same message. */
function failureStatus(message: string, reason: 'Failed' | 'RolledBack'): WantedStatus {
  return {
    phase: 'Failed',
    message: clip(`${MESSAGE_PREFIX}${message}`),
    nodeUpdated: { status: 'False', reason, message: clip(message) },
  };
}

export function createReconciler(o: ReconcilerOptions): Reconciler {
  const { name, machines, rpc, clock } = o;
  const logger = childLogger(o.logger, { machine: name });
  const busyRequeueMs = o.busyRequeueMs ?? 250;
  const busyWaitSeconds = o.busyWaitSeconds ?? 30;
  const maxAttempts = Math.max(1, o.maxAttempts ?? 3);
  const startedAt = clock.now();
  // Requests that failed in this process: not retried until the Machine changes (a new key).
  const failedKeys: string[] = [];
  const blocked = o.blocked ?? createMemoryBlockedTargetStore();

  /** The applied config, as the engine has it now (each read is a read of the node). */
  async function appliedView(signal: AbortSignal): Promise<AppliedView | null> {
    const generation = appliedGeneration;
    let view: AppliedView | null;
    try {
      const applied = await raceAbort(rpc.call('config.get'), signal, 'read the applied config');
      view = readAppliedView(applied.config);
    } catch (err) {
      if (!(err instanceof RpcError && err.appCode === 'NOT_FOUND')) throw err;
      view = null;
    }
    // Kept unless an operation ended while it was read (it may be from before that end).
    if (generation === appliedGeneration) knownApplied = { view };
    return view;
  }

  /** The applied config as last read, unless an operation ended since. */
  let knownApplied: { view: AppliedView | null } | null = null;
  /** Moves on at every operation's end. */
  let appliedGeneration = 0;
  const knownAppliedView = async (signal: AbortSignal): Promise<AppliedView | null> =>
    knownApplied !== null ? knownApplied.view : appliedView(signal);

  /** Every write also says what runs now (docs/watcher.md, "What runs"), read just before it. */
  const write = async (want: WantedStatus, signal: AbortSignal): Promise<Machine> => {
    const observed = await raceAbort(readObservedStatus(rpc), signal, 'read what the node runs');
    const base = o.cache?.get();
    const written = await machines.patchMachineStatus(name, statusMutation({ ...want, observed }), {
      signal,
      ...(base ? { base } : {}),
    });
    o.cache?.wrote(written);
    return written;
  };

  /** After a BUSY: wait out the operation someone else runs; true when one was running. */
  async function waitIfBusy(key: string, signal: AbortSignal): Promise<boolean> {
    const status = await raceAbort(rpc.call('status'), signal, 'read the status');
    const running = status.operation;
    if (running === null || running.idempotencyKey?.startsWith(key)) return false;
    logger.info(
      { operation: running.id, kind: running.kind },
      'another operation holds the node; waiting for it',
    );
    await raceAbort(
      rpc.call('operations.wait', { id: running.id, timeoutSeconds: busyWaitSeconds }),
      signal,
      `wait for operation ${running.id}`,
    );
    return true;
  }

  /**
   * Start the update (`wait: false`: answered once the engine admitted it, or with the operation
   * a key seen before names). An operation with our key that an earlier daemon's shutdown or
   * crash ended (cancelled/interrupted before this watcher started) is not the Machine's answer:
   * the request is made again under a derived key, up to `maxAttempts` in all.
   */
  async function startUpdate(d: MachineDecision, reason: string, signal: AbortSignal): Promise<Operation> {
    for (let attempt = 1; ; attempt += 1) {
      const idempotencyKey = attempt === 1 ? d.idempotencyKey : `${d.idempotencyKey}/attempt-${attempt}`;
      const op = await raceAbort(
        rpc.call('update', {
          ...(Object.keys(d.set).length > 0 ? { set: d.set } : {}),
          force: d.repave,
          wait: false,
          idempotencyKey,
          reason: clip(reason, 1024),
        }),
        signal,
        `update for Machine ${name}`,
      );
      const endedBefore = op.finishedAt !== null && Date.parse(op.finishedAt) < startedAt;
      const notAnAnswer = (op.state === 'cancelled' || op.state === 'interrupted') && endedBefore;
      if (!notAnAnswer || attempt >= maxAttempts) return op;
      logger.info(
        { operation: op.id, state: op.state, attempt },
        'an earlier daemon ended this update; asking again',
      );
    }
  }

  /** The started operation once it has ended. */
  async function waitForEnd(op: Operation, signal: AbortSignal): Promise<Operation> {
    if (hasEnded(op)) return op;
    return raceAbort(rpc.call('operations.wait', { id: op.id }), signal, `wait for update ${op.id}`);
  }

  function rememberFailed(key: string): void {
    failedKeys.push(key);
    if (failedKeys.length > FAILED_KEYS_KEPT) failedKeys.shift();
  }

  async function reportFailure(
    key: string,
    message: string,
    signal: AbortSignal,
    reason: 'Failed' | 'RolledBack' = 'Failed',
  ): Promise<void> {
    logger.warn({ error: message }, 'Machine update failed');
    await write(failureStatus(message, reason), signal);
    // Only once it is on the Machine: a failed write is retried, and asks `update` again first.
    rememberFailed(key);
  }

  /** Say on the Machine (again) why its target is not applied; writes nothing when it already says so. */
  async function reportBlocked(block: BlockedTarget, signal: AbortSignal): Promise<ReconcileResult> {
    const message = `${describeBlock(block)}: ${block.message}`;
    await write(failureStatus(message, block.outcome === 'rolled_back' ? 'RolledBack' : 'Failed'), signal);
    return { outcome: 'blocked', ...(block.operationId ? { operationId: block.operationId } : {}) };
  }

  let lastRead: string | null = null;
  async function reconcile(signal: AbortSignal): Promise<ReconcileResult> {
    // The three reads do not depend on one another: each is a wait (the API server, the engine's
    // read of the node, the state dir), so they wait together.
    const cached = o.cache?.get();
    const [machine, applied, block] = await Promise.all([
      cached ?? machines.getMachine(name),
      knownAppliedView(signal),
      blocked.read(),
    ]);
    lastRead = machine?.metadata.resourceVersion ?? null;
    return reconcileMachine(machine, applied, block, signal);
  }

  async function reconcileMachine(
    machine: Machine | null,
    applied: AppliedView | null,
    readBlock: BlockedTarget | null,
    signal: AbortSignal,
  ): Promise<ReconcileResult> {
    if (machine === null) {
      logger.warn('the Machine does not exist; nothing to reconcile');
      return { outcome: 'missing' };
    }
    if (applied === null) return { outcome: 'not-joined' };
    const d = decideMachine(machine, applied);
    let block = readBlock;
    if (block !== null && !blocksRequest(block, machine, d.set)) {
      // The Machine asks anew (a new counter, another target, a re-created Machine): forget it.
      logger.info(
        { blocked: block.target, operation: block.operationId },
        'the Machine asks anew; lifting the block',
      );
      await blocked.write(null);
      block = null;
    }
    o.onBlocked?.(block);
    const condition = nodeUpdatedCondition(machine);
    // A NodeUpdated=InProgress with no update of ours running is left over from a stopped
    // watcher: asking again with the same key finds how that update ended.
    const leftOver = condition?.status === 'False' && condition.reason === 'InProgress';
    if (!d.repave && d.drift.length === 0 && !leftOver) {
      // What runs is written when it changed (an operator's operation ended): nothing otherwise.
      const refresh =
        condition?.status === 'True' && condition.observedGeneration !== machine.metadata.generation;
      await write(
        refresh
          ? {
              nodeUpdated: {
                status: 'True',
                reason: condition.reason ?? 'Succeeded',
                message: condition.message ?? '',
              },
            }
          : {},
        signal,
      );
      return { outcome: 'in-sync' };
    }
    if (block !== null) return reportBlocked(block, signal);
    if (failedKeys.includes(d.idempotencyKey)) return { outcome: 'already-failed' };

    const summary = describeDecision(d) || 'finish the update a stopped watcher left in progress';
    logger.info(
      { repave: d.repave, drift: d.drift, key: d.idempotencyKey },
      `Machine asks for an update: ${summary}`,
    );

    // The update starts first and the Machine is told after (docs/watcher.md, "Reconcile"): the
    // status write is a round trip to the API server and a write to etcd, which the node need not
    // wait for. Should agentd stop between the two, the Machine still asks for the same update,
    // and the same key finds how it ended.
    let op: Operation;
    try {
      op = await startUpdate(d, `Machine ${name}: ${summary}`, signal);
    } catch (err) {
      if (!(err instanceof RpcError)) throw err;
      if (err.appCode === 'BUSY') {
        // Asked first, not looked for before: a node is seldom busy, and a look is a read of it.
        await waitIfBusy(d.idempotencyKey, signal);
        return { outcome: 'busy', requeueAfterMs: busyRequeueMs };
      }
      if (RETRYABLE_RPC_CODES.has(err.appCode)) throw err;
      // The request itself is wrong (invalid version, precondition…): report it on the Machine.
      await reportFailure(d.idempotencyKey, `update refused (${err.appCode}): ${err.message}`, signal);
      return { outcome: 'failed' };
    }
    if (!hasEnded(op)) {
      try {
        await write(
          {
            phase: 'Provisioning',
            message: null,
            nodeUpdated: { status: 'False', reason: 'InProgress', message: clip(summary) },
          },
          signal,
        );
      } catch (err) {
        if (signal.aborted) throw err;
        // The update runs all the same; the write of its outcome says how it ended.
        logger.warn({ err: describeError(err), operation: op.id }, 'marking the Machine Provisioning failed');
      }
      // While it waits (the fleet gate), the Machine's condition says why.
      const stopReporting = reportWaits(
        { rpc, clock, logger, key: d.idempotencyKey, summary, write, pollMs: o.waitPollMs },
        signal,
      );
      try {
        op = await waitForEnd(op, signal);
      } finally {
        await stopReporting();
      }
    }

    if (op.state === 'rolled_back' || op.state === 'failed') {
      // Recorded before the Machine is told, so a restart in between still does not retry it.
      const record: BlockedTarget = {
        version: 1,
        machineUid: machine.metadata.uid ?? '',
        repaveCounter: d.requestedCounter,
        target: d.set,
        operationId: op.id,
        outcome: op.state,
        code: op.error?.code ?? 'INTERNAL',
        message: clip(op.error?.message ?? 'no error recorded'),
        since: new Date(clock.now()).toISOString(),
      };
      await blocked.write(record);
      o.onBlocked?.(record);
      logger.warn(
        { operation: op.id, state: op.state, code: record.code, target: d.set },
        'Machine update did not succeed; its target is blocked until the Machine asks anew',
      );
      await reportBlocked(record, signal);
      return { outcome: 'failed', operationId: op.id };
    }
    if (op.state !== 'succeeded') {
      const why = op.error ? `${op.error.code}: ${op.error.message}` : 'no error recorded';
      await reportFailure(d.idempotencyKey, `update ${op.id} ${op.state}: ${why}`, signal);
      return { outcome: 'failed', operationId: op.id };
    }
    const after = await appliedView(signal);
    const changed = op.result?.changed !== false;
    const message = `update ${op.id} succeeded${changed ? ` (${op.from ?? 'new node'} → ${op.to ?? '?'})` : ' (nothing to change)'}`;
    await write(
      {
        phase: 'Joining',
        message: null,
        // The counter this update satisfied: bumps that arrived meanwhile get their own update.
        ...(d.repave ? { repaveCounter: d.requestedCounter } : {}),
        ...(after ? { agentImage: after.image } : {}),
        nodeUpdated: { status: 'True', reason: 'Succeeded', message },
      },
      signal,
    );
    logger.info({ operation: op.id, acknowledged: d.repave ? d.requestedCounter : null }, 'Machine updated');
    return { outcome: 'updated', operationId: op.id };
  }

  return {
    reconcile,
    appliedMayHaveChanged() {
      appliedGeneration += 1;
      knownApplied = null;
    },
    lastReadResourceVersion: () => lastRead,
  };
}
