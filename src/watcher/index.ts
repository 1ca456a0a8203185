/** The Machine CR watcher: watch loop, work queue and reconciler (docs/watcher.md). */
export { createMachineWatcher } from './watcher.js';
export type { MachineWatcher, MachineWatcherOptions } from './watcher.js';
export type { ReconcileOutcome, ReconcileResult } from './reconcile.js';
export { createBlockedTargetFile } from './blocked-target.js';
export type { BlockedTarget, BlockedTargetStore } from './blocked-target.js';
