/**
 * The state files read as claims, checked against the host before an update acts on them
 * (docs/architecture.md, "Recovery checks"). An update provisions over the machine that is not
 * the active one: when node.json names the wrong machine, that would be the one that serves.
 */
import { StateConflictError } from '../errors.js';
import { MACHINE_NAMES } from '../host/types.js';
import type { Disagreement, HostFacts } from './host-truth.js';
import type { StatusWarning } from './warnings.js';

export type StateConflictWarning = Extract<StatusWarning, { code: 'state-conflict' }>;

/**
 * What agentd does while `file` disagrees with the host or another file: every update is
 * refused (the engine's admission), and no machine that serves is stopped or removed on it.
 */
export function conflictAction(file: string): string {
  return `agentd refuses every update (STATE_CONFLICT) and stops or removes no machine that serves on its word; move ${file} aside (docs/operations.md, "A corrupt state file") and agentd decides from the host`;
}

/** The `status` warning of a disagreement, saying what agentd did (default: `conflictAction`). */
export function conflictWarning(d: Disagreement, action = conflictAction(d.file)): StateConflictWarning {
  return {
    code: 'state-conflict',
    message: `${d.message}: ${action}`,
    file: d.file,
    against: d.against,
    machine: d.serving,
    action,
  };
}

/**
 * The refusal of an update while the state files disagree with the host or with each other
 * (`found`, from the node's read): STATE_CONFLICT, naming the first file and what the host shows.
 */
export function stateConflictError(found: readonly Disagreement[], facts: HostFacts): StateConflictError {
  const first = found[0];
  return new StateConflictError(
    `${found.map((f) => f.message).join('; ')}; agentd acts on no machine while its files disagree with the host: move ${first?.file ?? 'the file'} aside (docs/operations.md, "A corrupt state file") and agentd decides from the host`,
    {
      data: {
        file: first?.file,
        host: Object.fromEntries(
          MACHINE_NAMES.map((m) => [
            m,
            facts[m].serving
              ? 'serving'
              : facts[m].running
                ? 'running'
                : facts[m].exists
                  ? 'stopped'
                  : 'absent',
          ]),
        ),
        disagreements: found,
      },
    },
  );
}
