/**
 * The `drain` and `uncordon` operations (docs/api.md), and the drain seam the update's drain and
 * uncordon phases use. Both run on `NodeDrainOps`, this node's cordon/drain bound to the
 * Kubernetes clients of the moment (see `src/kube/session.ts`).
 */
import { AgentError, CancelledError, PreconditionFailedError, isAgentError } from '../errors.js';
import type { DrainOptions, DrainResult } from '../kube/index.js';
import type { NodeOps } from '../kube/session.js';
import type { OperationRecorder } from './operation-recorder.js';
import type { NodeDrainer, UpdateOutcome } from './update.js';

export const DRAIN_PHASES = ['drain'] as const;
export const UNCORDON_PHASES = ['uncordon'] as const;

/** Cordon, drain and uncordon of this node, bound to the Kubernetes session (`src/kube/session.ts`). */
export type NodeDrainOps = NodeOps;

/** A `drain` request as the RPC method passes it. */
export interface DrainRequest {
  timeoutSeconds: number;
  force?: boolean;
  ignoreDaemonSets?: boolean;
  deleteEmptyDirData?: boolean;
  dryRun?: boolean;
  wait?: boolean;
  reason?: string;
  requestedBy: string;
}

/** An `uncordon` request as the RPC method passes it. */
export interface UncordonRequest {
  force?: boolean;
  wait?: boolean;
  reason?: string;
  requestedBy: string;
}

/**
 * How the update's drain phase drains: the old machine and every pod in it are about to stop
 * anyway, so DaemonSet pods are skipped (they stay until the machine stops) and emptyDir data,
 * which lives in the machine being replaced, is not a reason to refuse. Pods without a
 * controller still refuse the drain: they would not come back, and the operator decides.
 */
export const UPDATE_DRAIN_OPTIONS: Readonly<DrainOptions> = Object.freeze({
  ignoreDaemonSets: true,
  deleteEmptyDirData: true,
  force: false,
  timeoutMs: 300_000,
});

/** Throws PRECONDITION_FAILED when drain cannot run; returns the ops otherwise. */
export function requireNodeOps(ops: NodeDrainOps | null | undefined): NodeDrainOps {
  const why = ops ? ops.unavailableReason() : 'agentd runs without Kubernetes wiring';
  if (ops && why === null) return ops;
  throw new PreconditionFailedError(`drain and uncordon need the Kubernetes API: ${why}`, {
    data: { reason: why },
  });
}

function drainOptions(req: DrainRequest, signal?: AbortSignal): DrainOptions {
  return {
    timeoutMs: Math.round(req.timeoutSeconds * 1000),
    force: Boolean(req.force),
    ignoreDaemonSets: Boolean(req.ignoreDaemonSets),
    deleteEmptyDirData: Boolean(req.deleteEmptyDirData),
    dryRun: Boolean(req.dryRun),
    ...(signal ? { signal } : {}),
  };
}

/** The operation result of a drain: what was evicted, skipped and is left, each with a reason. */
export function drainResultRecord(r: DrainResult): Record<string, unknown> {
  return {
    node: r.node,
    dryRun: r.dryRun,
    alreadyCordoned: r.cordon?.alreadyCordoned ?? null,
    evicted: r.evicted,
    skipped: r.skipped,
    remaining: r.remaining,
    warnings: r.warnings,
  };
}

/** The same lists out of a DRAIN_FAILED error (refused pods count as remaining). */
function failedDrainRecord(err: unknown): Record<string, unknown> {
  if (!isAgentError(err) || err.code !== 'DRAIN_FAILED') return {};
  const d = err.data;
  return {
    node: d.node ?? null,
    dryRun: false,
    evicted: d.evicted ?? [],
    skipped: d.skipped ?? [],
    remaining: d.remaining ?? d.refused ?? [],
    failure: d.reason ?? null,
  };
}

/** Run a `drain` operation: cordon, evict, wait for the pods to be gone. */
export async function runDrain(
  ops: NodeDrainOps,
  rec: OperationRecorder,
  req: DrainRequest,
  signal: AbortSignal,
): Promise<UpdateOutcome> {
  await rec.start();
  await rec.phaseStarted('drain');
  try {
    const r = await ops.drain(drainOptions(req, signal));
    await rec.phaseEnded('drain', 'succeeded');
    return { state: 'succeeded', result: drainResultRecord(r) };
  } catch (err) {
    const cancelled = signal.aborted || err instanceof CancelledError;
    await rec.phaseEnded('drain', cancelled ? 'cancelled' : 'failed', err);
    // A drain that timed out leaves the node cordoned on purpose: `uncordon` undoes it.
    return { state: cancelled ? 'cancelled' : 'failed', result: failedDrainRecord(err), error: err };
  }
}

/** The result of a dry-run drain (no operation is recorded, as with `update --dry-run`). */
export async function dryRunDrain(ops: NodeDrainOps, req: DrainRequest): Promise<Record<string, unknown>> {
  return drainResultRecord(await ops.drain(drainOptions({ ...req, dryRun: true })));
}

/** Run an `uncordon` operation: undo agentd's cordon (or, with force, anyone's). */
export async function runUncordon(
  ops: NodeDrainOps,
  rec: OperationRecorder,
  req: UncordonRequest,
): Promise<UpdateOutcome> {
  await rec.start();
  await rec.phaseStarted('uncordon');
  try {
    const r = await ops.uncordon({ force: Boolean(req.force) });
    await rec.phaseEnded('uncordon', 'succeeded');
    return { state: 'succeeded', result: { uncordoned: r.uncordoned, outcome: r.outcome } };
  } catch (err) {
    await rec.phaseEnded('uncordon', 'failed', err);
    return { state: 'failed', result: {}, error: err };
  }
}

/**
 * The update's drain seam. It cordons first so that it knows whether the cordon is its own
 * before anything is evicted; a drain that fails takes its own cordon back at once, because
 * a failure before stop leaves the old machine serving.
 */
export function createUpdateDrainer(
  ops: NodeDrainOps,
  options: Readonly<DrainOptions> = UPDATE_DRAIN_OPTIONS,
): NodeDrainer {
  return {
    async drain(signal) {
      const cordon = await ops.cordon();
      const cordonedByUs = !cordon.alreadyCordoned;
      try {
        const r = await ops.drain({ ...options, cordon: false, signal });
        return { cordonedByUs, result: { ...drainResultRecord(r), alreadyCordoned: cordon.alreadyCordoned } };
      } catch (err) {
        if (cordonedByUs) {
          await ops.uncordon().catch((undo: unknown) => {
            throw new AgentError(
              isAgentError(err) ? err.code : 'INTERNAL',
              `${err instanceof Error ? err.message : String(err)}; and taking back the cordon failed: ${undo instanceof Error ? undo.message : String(undo)}`,
              { cause: err, data: isAgentError(err) ? err.data : {} },
            );
          });
        }
        throw err;
      }
    },
    async uncordon() {
      await ops.uncordon();
    },
  };
}
