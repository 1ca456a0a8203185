/**
 * Every agent's view of the fleet policy (docs/fleet.md, "The policy"): a list+watch of the one
 * ConfigMap `agentd-fleet`, run by the one reflector of src/kube (src/kube/reflector.ts), which
 * resumes, lists again on 410 and backs off after failures. A policy that does not validate
 * is reported (status, metric, log, naming the field) and never half-applied: the last good one
 * holds; with no good one yet, the defaults hold (a ConfigMap exists, so the fleet is gated).
 * No ConfigMap: no policy, no gate.
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { createReflector, type ConfigMapRecord, type FleetObjects } from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import { WATCH_BACKOFF, type BackoffPolicy } from '../retry/backoff.js';
import { Pulse } from './pulse.js';
import { anyWindowOpen } from './windows.js';
import { POLICY_CONFIGMAP, POLICY_KEY, PolicyError, parsePolicy, type FleetPolicy } from './policy.js';

/** What the agent knows of the policy; `fleet.status` shows it. */
export interface PolicyState {
  /** The first list answered: until then nothing is known and the gate waits. */
  synced: boolean;
  /** The ConfigMap exists. */
  present: boolean;
  /** The policy in force (null: no ConfigMap, no gate). */
  policy: FleetPolicy | null;
  /** Why the ConfigMap's current content is not in force; null when it is. */
  error: string | null;
  /** The offending field of `error`. */
  errorField: string | null;
  resourceVersion: string | null;
}

export interface FleetPolicySource {
  /** The policy in force, or null when there is no `agentd-fleet` ConfigMap (no gate). */
  current(): FleetPolicy | null;
  state(): PolicyState;
  /** Resolves at the next change of the state, or when `signal` aborts. */
  nextChange?(signal: AbortSignal): Promise<void>;
}

export interface PolicyWatch extends FleetPolicySource {
  start(): void;
  stop(): Promise<void>;
}

export interface PolicyWatchOptions {
  objects: Pick<FleetObjects, 'configMapSource' | 'namespace'>;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  backoff?: BackoffPolicy;
  /** Called after every change of the state (status version bump). */
  onChange?: () => void;
}

/** The defaults: what holds while a present ConfigMap has never validated. */
const DEFAULT_POLICY = parsePolicy('');

/**
 * What the ConfigMap `cm` (null: there is none) says of the policy: no ConfigMap, no gate;
 * content that does not validate is not applied, `lastGood` (else the defaults) holds and the
 * error names the field. The watch below and agentctl's one-off read (operator.ts) both use it.
 */
export function policyStateOf(cm: ConfigMapRecord | null, lastGood: FleetPolicy | null): PolicyState {
  if (cm === null) {
    return {
      synced: true,
      present: false,
      policy: null,
      error: null,
      errorField: null,
      resourceVersion: null,
    };
  }
  const text = cm.data[POLICY_KEY];
  try {
    if (text === undefined) {
      throw new PolicyError(`${POLICY_CONFIGMAP}: no data key ${POLICY_KEY}`, POLICY_KEY);
    }
    const policy = parsePolicy(text);
    return {
      synced: true,
      present: true,
      policy,
      error: null,
      errorField: null,
      resourceVersion: cm.resourceVersion,
    };
  } catch (err) {
    return {
      synced: true,
      present: true,
      policy: lastGood ?? DEFAULT_POLICY,
      error: describeError(err),
      errorField: err instanceof PolicyError ? err.field : POLICY_KEY,
      resourceVersion: cm.resourceVersion,
    };
  }
}

export function createPolicyWatch(o: PolicyWatchOptions): PolicyWatch {
  const logger = o.logger.child({ component: 'fleet-policy' });
  let state: PolicyState = {
    synced: false,
    present: false,
    policy: null,
    error: null,
    errorField: null,
    resourceVersion: null,
  };
  let lastGood: FleetPolicy | null = null;
  // The policy that holds (the last good one while the ConfigMap cannot be read), at each scrape.
  o.metrics.setFleetWindowSource(() => {
    const policy = state.policy ?? lastGood;
    return policy === null || anyWindowOpen(policy.windows, o.clock.now());
  });
  let loop: Promise<void> | null = null;

  const changed = new Pulse();
  const set = (next: PolicyState): void => {
    state = next;
    o.metrics.fleetPaused.set(next.policy?.paused ? 1 : 0);
    o.onChange?.();
    changed.fire();
  };

  function apply(cm: ConfigMapRecord | null): void {
    if (cm !== null && cm.resourceVersion === state.resourceVersion && state.synced) return;
    const next = policyStateOf(cm, lastGood);
    if (cm === null) {
      if (state.present) logger.info('the fleet policy ConfigMap is gone: no fleet gate');
      lastGood = null;
    } else if (next.error === null) {
      lastGood = next.policy;
      logger.info({ policy: next.policy, resourceVersion: cm.resourceVersion }, 'fleet policy in force');
    } else {
      o.metrics.fleetPolicyErrors.inc();
      logger.warn(
        {
          field: next.errorField,
          error: next.error,
          keeping: lastGood ? 'the last good policy' : 'the default policy',
        },
        'the fleet policy does not validate; it is not applied',
      );
    }
    set(next);
  }

  const what = `ConfigMap ${o.objects.namespace}/${POLICY_CONFIGMAP}`;
  const reflector = createReflector<ConfigMapRecord>({
    ...o.objects.configMapSource(POLICY_CONFIGMAP),
    onList: (items) => apply(items[0] ?? null),
    onEvent: (type, cm) => apply(type === 'DELETED' ? null : cm),
    onConnected(connected) {
      // The watch works again: an error of reading the policy (not of its content) is over.
      if (connected && state.error !== null && state.errorField === null) set({ ...state, error: null });
    },
    onDecodeError: (err) =>
      logger.warn({ err: err.message }, `a watch event of ${what} could not be decoded`),
    onFailure(err, retryInMs) {
      const why = describeError(err);
      const reason = err.data.reason;
      if ((reason === 'Forbidden' || reason === 'Unauthorized') && !state.present) {
        // Credentials the API server rejects, or RBAC without the fleet rights (deploy/rbac.yaml
        // older than the gate): no policy can be read, so there is none: no gate, as without
        // credentials or the ConfigMap. Said in status and the log.
        set({ ...state, synced: true, policy: null, error: why, errorField: null });
      } else if (!state.synced) {
        set({ ...state, error: why });
      }
      logger.warn({ err: why, retryInMs }, `watch of ${what} failed`);
    },
    clock: o.clock,
    backoff: o.backoff ?? WATCH_BACKOFF,
  });

  return {
    current: () => state.policy,
    state: () => state,
    nextChange: (signal) => changed.next(signal),
    start() {
      loop ??= reflector.start();
    },
    async stop() {
      await reflector.stop();
    },
  };
}
