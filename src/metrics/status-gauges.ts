/**
 * Gauges that show what `status` shows, for alerts (deploy/prometheus/): the running operation's
 * phase and since when, the watcher's connection and repair's state. Set from one `status` read
 * before each scrape (src/daemon), never from the parts themselves: the state they show lives in
 * the engine and the watcher, and a scrape reads it as `agentctl status` does.
 */
import { Gauge, type Registry } from 'prom-client';

/** The states `agentd_watcher_state` reports, one series each. */
export const WATCHER_STATES = ['off', 'connected', 'disconnected'] as const;
/** The states `agentd_repair_state` reports, one series each (`status.node.repair.state`). */
export const REPAIR_STATES = ['off', 'idle', 'repairing', 'backoff', 'gave_up'] as const;

/** What the gauges are set from: the parts of `status` they show (structural: no engine import). */
export interface StatusFacts {
  operation: {
    kind: string;
    phases: readonly { name: string; state: string; startedAt: string | null }[];
  } | null;
  repair: { state: (typeof REPAIR_STATES)[number] } | null;
  /** null: no Kubernetes wiring (the watcher is off). */
  watcher: { enabled: boolean; connected: boolean } | null;
}

export function registerStatusGauges(registry: Registry) {
  const r = [registry];
  const phaseStart = new Gauge({
    name: 'agentd_operation_phase_start_timestamp_seconds',
    help: 'Unix time at which the running phase of the running operation started, by kind and phase; no series while no phase runs.',
    labelNames: ['kind', 'phase'],
    registers: r,
  });
  const watcherState = new Gauge({
    name: 'agentd_watcher_state',
    help: 'The Machine watcher: 1 for its current state (off, connected, disconnected), 0 for the others.',
    labelNames: ['state'],
    registers: r,
  });
  const repairState = new Gauge({
    name: 'agentd_repair_state',
    help: 'Repair of the node: 1 for its current state (off, idle, repairing, backoff, gave_up), 0 for the others.',
    labelNames: ['state'],
    registers: r,
  });
  return {
    /** Set the gauges from what `status` answers now. */
    observe(facts: StatusFacts): void {
      phaseStart.reset();
      const running = facts.operation?.phases.find((p) => p.state === 'running' && p.startedAt !== null);
      if (facts.operation && running?.startedAt) {
        phaseStart.set(
          { kind: facts.operation.kind, phase: running.name },
          Date.parse(running.startedAt) / 1000,
        );
      }
      const w = facts.watcher;
      const watcher = w === null || !w.enabled ? 'off' : w.connected ? 'connected' : 'disconnected';
      for (const s of WATCHER_STATES) watcherState.set({ state: s }, s === watcher ? 1 : 0);
      const repair = facts.repair?.state ?? 'off';
      for (const s of REPAIR_STATES) repairState.set({ state: s }, s === repair ? 1 : 0);
    },
  };
}
