/**
 * What the RPC methods need of the engine: three small ports, each declared here by the methods
 * that call it, in the style of moby's API server, where each router declares the backend it
 * needs and the daemon passes in what implements it. A method reaches the engine only through
 * these (`CallContext.services`), never through the `Engine` class: one path for a call, from the
 * route (src/server/rpc-route.ts) through the dispatcher and a method to a port.
 *
 * The engine implements all three by shape (src/engine may not import src/rpc); the daemon's
 * assembly (src/daemon/assembly.ts) hands it in as each port, so the compiler checks that it
 * does. Tests hand in stand-ins.
 */
import type { AgentConfig } from '../config/agent-config.js';
import type { DrainRequest, UncordonRequest } from '../engine/drain-ops.js';
import type { GoalSet } from '../engine/goal.js';
import type { Operation } from '../engine/operation.js';
import type { EngineStatus } from '../engine/status-reader.js';
import type { UpdateRequest } from '../engine/update.js';
import type { MachineName } from '../host/types.js';

/** The reads of the node: `status` and `config.get`. */
export interface StatusReader {
  /** The node (at most its max age old), the running and the last operation, the warnings. */
  status(): Promise<EngineStatus>;
  /** The active machine's applied config, secrets redacted; null on a node not joined yet. */
  appliedConfig(): Promise<{
    machine: MachineName;
    config: AgentConfig;
    hash: string;
    verified: boolean;
  } | null>;
}

/** The operations of the node and their history: `update`, `reset`, `preflight`, `operations.*`. */
export interface OperationsPort {
  update(req: UpdateRequest): Promise<Operation>;
  reset(req: { wait?: boolean; reason?: string; requestedBy: string }): Promise<Operation>;
  /** An update's preflight checks, changing nothing (default config: what an update with no params would apply). */
  preflight(
    config: AgentConfig | undefined,
    signal: AbortSignal,
    set?: GoalSet,
  ): Promise<{ config: AgentConfig; checks: Array<{ name: string; ok: boolean; message: string }> }>;
  getOperation(id: string): Operation;
  listOperations(filter: { limit?: number; state?: string }): Operation[];
  /** The operation once it ends, or as it is when `timeoutMs` passes. */
  waitOperation(id: string, timeoutMs: number | undefined): Promise<Operation>;
  cancelOperation(id: string): Operation;
}

/** This node's cordon and drain in Kubernetes: `drain` and `uncordon`. */
export interface DrainPort {
  drain(req: DrainRequest): Promise<Operation>;
  uncordon(req: UncordonRequest): Promise<Operation>;
}
