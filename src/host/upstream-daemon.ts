/**
 * The upstream agent's own daemon, `unbounded-agent-daemon.service` (`Restart=always`,
 * enabled in multi-user.target; newer versions repave on their own). Left running beside
 * agentd, after a reboot two agents flip the node between kube1 and kube2. agentd takes the
 * node over: at start and before every update's provision it stops and disables that unit,
 * and says so once in its log and in `status` (docs/operations.md, "Taking over from the
 * upstream agent").
 */
import type { Logger } from 'pino';
import { PreconditionFailedError, describeError } from '../errors.js';
import type { Clock, CommandRunner } from './types.js';

export const UPSTREAM_DAEMON_UNIT = 'unbounded-agent-daemon.service';

/** `systemctl is-enabled` answers for a unit that starts at boot. */
const ENABLED_STATES = new Set(['enabled', 'enabled-runtime', 'linked', 'linked-runtime', 'alias']);
/** `systemctl is-active` answers for a unit that runs or is about to. */
const ACTIVE_STATES = new Set(['active', 'activating', 'reloading', 'refreshing']);

/** What agentd did to the upstream daemon. */
export interface UpstreamDaemonTakeover {
  /** When it stopped and disabled it (ISO 8601). */
  readonly at: string;
  /** `systemctl is-enabled` said so before. */
  readonly wasEnabled: boolean;
  /** `systemctl is-active` said so before. */
  readonly wasActive: boolean;
}

export interface UpstreamDaemonGuard {
  /**
   * Stop and disable the upstream daemon when it is enabled or running; nothing when it is
   * neither (or not installed). Throws PRECONDITION_FAILED when it cannot be stopped.
   */
  takeOver(signal?: AbortSignal): Promise<UpstreamDaemonTakeover | null>;
  /** For `status`: what agentd did (once it did), or why it could not. */
  warnings(): string[];
}

export function createUpstreamDaemonGuard(o: {
  runner: CommandRunner;
  clock: Clock;
  logger: Logger;
}): UpstreamDaemonGuard {
  let taken: UpstreamDaemonTakeover | null = null;
  let failure: string | null = null;

  async function state(verb: 'is-enabled' | 'is-active', signal?: AbortSignal): Promise<string> {
    // Both exit non-zero for "no" (and for a unit that is not installed): the answer is stdout.
    const r = await o.runner.run('systemctl', [verb, UPSTREAM_DAEMON_UNIT], { reject: false, signal });
    return r.stdout.trim();
  }

  return {
    async takeOver(signal) {
      let enabled: string;
      let active: string;
      try {
        [enabled, active] = [await state('is-enabled', signal), await state('is-active', signal)];
      } catch (err) {
        // Not known either way (systemctl could not even be run: descriptors exhausted, …): the
        // update waits for a host that can answer, and status claims nothing about the daemon.
        throw new PreconditionFailedError(
          `cannot tell whether the upstream agent's daemon ${UPSTREAM_DAEMON_UNIT} runs (${describeError(err)}); try again once the host answers`,
          { cause: err, data: { unit: UPSTREAM_DAEMON_UNIT } },
        );
      }
      try {
        const wasEnabled = ENABLED_STATES.has(enabled);
        const wasActive = ACTIVE_STATES.has(active);
        if (!wasEnabled && !wasActive) {
          failure = null;
          return null;
        }
        await o.runner.run('systemctl', ['disable', '--now', UPSTREAM_DAEMON_UNIT], { signal });
        const done = Object.freeze({ at: new Date(o.clock.now()).toISOString(), wasEnabled, wasActive });
        taken = done;
        failure = null;
        o.logger.warn(
          { unit: UPSTREAM_DAEMON_UNIT, wasEnabled, wasActive },
          'stopped and disabled the upstream agent’s daemon: agentd manages this node now',
        );
        return done;
      } catch (err) {
        failure = describeError(err);
        throw new PreconditionFailedError(
          `the upstream agent's daemon ${UPSTREAM_DAEMON_UNIT} could not be stopped and disabled (${failure}); ` +
            `run: systemctl disable --now ${UPSTREAM_DAEMON_UNIT}`,
          { cause: err, data: { unit: UPSTREAM_DAEMON_UNIT } },
        );
      }
    },
    warnings() {
      if (failure !== null) {
        return [
          `the upstream agent's daemon ${UPSTREAM_DAEMON_UNIT} could not be stopped (${failure}): run systemctl disable --now ${UPSTREAM_DAEMON_UNIT}`,
        ];
      }
      if (taken === null) return [];
      const was = [taken.wasEnabled ? 'enabled' : '', taken.wasActive ? 'running' : '']
        .filter(Boolean)
        .join(' and ');
      return [
        `agentd stopped and disabled the upstream agent's daemon ${UPSTREAM_DAEMON_UNIT} (it was ${was}) at ${taken.at}`,
      ];
    },
  };
}
