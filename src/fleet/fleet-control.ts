/**
 * What operators see and steer from any node (docs/fleet.md, "Operating the fleet"): the fleet
 * status (policy, slots, windows, pause, halt, failures), pause and resume. `paused` lives in the
 * policy ConfigMap itself: pause and resume edit its `policy.yaml` in place (comments and other
 * keys kept) with the resourceVersion read, so the same object an operator applies is the one
 * place the pause is visible. Resume also clears the recorded failures, ending a halt.
 */
import { isMap, parseDocument } from 'yaml';
import { DEFAULT_FLEET_NAMESPACE } from '../config/fleet-namespace.js';
import { InvalidConfigError, PreconditionFailedError, describeError, isAgentError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { isAlreadyExists, isWriteConflict, type FleetObjects } from '../kube/index.js';
import { CONFLICT_BACKOFF, backoffDelay } from '../retry/backoff.js';
import type { FleetFailure, FleetState } from './fleet-state.js';
import type { PolicyState } from './policy-watch.js';
import type { SlotView } from './slot-view.js';
import { POLICY_CONFIGMAP, POLICY_KEY, STATE_CONFIGMAP, parsePolicy, type FleetPolicy } from './policy.js';
import { anyWindowOpen, nextWindowOpen } from './windows.js';

/** The fleet as anyone with its read rights sees it: a node's agentd, an operator's agentctl. */
export interface FleetView {
  namespace: string;
  /** The policy ConfigMap has been read at least once. */
  synced: boolean;
  /** The `agentd-fleet` ConfigMap exists: updates pass the gate. */
  present: boolean;
  /** The policy in force (null: no gate). */
  policy: FleetPolicy | null;
  /** Why the ConfigMap's content is not in force (the last good policy holds). */
  policyError: string | null;
  policyErrorField: string | null;
  paused: boolean;
  halted: boolean;
  windowOpen: boolean;
  nextWindowOpen: string | null;
  slots: SlotView[];
  failures: FleetFailure[];
  /** What could not be read (slots, failures); the rest is still shown. */
  errors: string[];
}

/** The fleet as a node's agentd sees it (`fleet.status`). */
export interface FleetStatus extends FleetView {
  /** This agent's holder identity (its node name). */
  node: string;
}

/** Status, pause and resume; `S` is the view with what the caller says of itself (its node). */
export interface FleetControl<S extends FleetView = FleetStatus> {
  status(): Promise<S>;
  /** Set `paused: true` in the policy (creating the ConfigMap when there is none). */
  pause(): Promise<S>;
  /** Set `paused: false` and clear the recorded failures; returns how many were cleared. */
  resume(): Promise<{ status: S; clearedFailures: number }>;
}

const MAX_ATTEMPTS = 10;

/**
 * A refusal of pause or resume by the API server: with deploy/rbac.yaml a node's credentials may
 * not edit the policy nor clear the recorded failures (docs/fleet.md, "Pause, halt and resume"),
 * so say that it is an operator's right and how an operator does it. Other errors pass through.
 */
export function operatorRightError(err: unknown, namespace: string, configMap: string): unknown {
  if (!isAgentError(err) || err.data.reason !== 'Forbidden') return err;
  return new PreconditionFailedError(
    `pausing and resuming the fleet is an operator right: this node's credentials may not update ConfigMap ${namespace}/${configMap} (${err.message}); ` +
      `as an operator, run agentctl fleet pause or resume${namespace === DEFAULT_FLEET_NAMESPACE ? '' : ` --fleet-namespace ${namespace}`} with your own kubeconfig (--kubeconfig FILE, else KUBECONFIG, else ~/.kube/config), ` +
      `or edit it with kubectl (kubectl -n ${namespace} edit configmap ${POLICY_CONFIGMAP}: paused: true or false; kubectl -n ${namespace} delete configmap ${STATE_CONFIGMAP} clears the failures; docs/fleet.md, "Pause, halt and resume")`,
    { cause: err, data: { reason: 'OperatorRight', configMap: `${namespace}/${configMap}` } },
  );
}

export interface FleetControlOptions<A extends object> {
  objects: Pick<FleetObjects, 'getConfigMap' | 'createConfigMap' | 'replaceConfigMap' | 'namespace'>;
  /** The policy as the caller holds it: a node its watch's (policy-watch.ts), agentctl a fresh read. */
  policyState: () => PolicyState | Promise<PolicyState>;
  state: Pick<FleetState, 'failures' | 'clear'>;
  /** The slots (slot-view.ts), read anew for each status. */
  slots: () => Promise<SlotView[]>;
  /** What the status says of who looks, beside the namespace: a node's agentd, `{ node }`. */
  about: A;
  /**
   * What a failed pause or resume write becomes, given the ConfigMap it was about (default
   * `operatorRightError`: a node's credentials refused).
   */
  refused?: (err: unknown, namespace: string, configMap: string) => unknown;
  clock: Clock;
}

export function createFleetControl<A extends object>(o: FleetControlOptions<A>): FleetControl<FleetView & A> {
  const { objects, clock } = o;

  /** Edit `paused` in the policy text; null when nothing changes. */
  function withPaused(text: string, paused: boolean): string | null {
    const doc = parseDocument(text);
    if (doc.errors.length > 0 || !(isMap(doc.contents) || doc.contents === null)) {
      throw new InvalidConfigError(
        `ConfigMap ${objects.namespace}/${POLICY_CONFIGMAP} ${POLICY_KEY} is not a YAML mapping (${doc.errors[0]?.message ?? 'not a mapping'}); fix it before pausing or resuming`,
        { data: { field: POLICY_KEY } },
      );
    }
    if (doc.get('paused') === paused) return null;
    doc.set('paused', paused);
    const next = doc.toString();
    parsePolicy(next); // the edit itself must not be what makes the policy invalid
    return next;
  }

  async function setPaused(paused: boolean): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      const cm = await objects.getConfigMap(POLICY_CONFIGMAP);
      try {
        if (cm === null) {
          if (!paused) return; // no policy: nothing is paused
          await objects.createConfigMap(POLICY_CONFIGMAP, { [POLICY_KEY]: 'paused: true\n' });
          return;
        }
        const next = withPaused(cm.data[POLICY_KEY] ?? '', paused);
        if (next === null) return;
        await objects.replaceConfigMap(POLICY_CONFIGMAP, cm.resourceVersion, {
          ...cm.data,
          [POLICY_KEY]: next,
        });
        return;
      } catch (err) {
        if (!(isWriteConflict(err) || isAlreadyExists(err)) || attempt >= MAX_ATTEMPTS) throw err;
        await clock.sleep(backoffDelay(attempt, CONFLICT_BACKOFF));
      }
    }
  }

  const refused = o.refused ?? operatorRightError;

  async function status(): Promise<FleetView & A> {
    const ps = await o.policyState();
    const policy = ps.policy;
    const errors: string[] = [];
    const now = clock.now();
    const [slots, failures] = await Promise.all([
      o.slots().catch((err: unknown) => {
        errors.push(`slots: ${describeError(err)}`);
        return [];
      }),
      o.state.failures().catch((err: unknown) => {
        errors.push(`failures: ${describeError(err)}`);
        return [];
      }),
    ]);
    const windows = policy?.windows ?? [];
    const next = policy === null ? null : nextWindowOpen(windows, now);
    return {
      namespace: objects.namespace,
      ...o.about,
      synced: ps.synced,
      present: ps.present,
      policy,
      policyError: ps.error,
      policyErrorField: ps.errorField,
      paused: policy?.paused ?? false,
      halted: policy !== null && failures.length >= policy.maxFailures,
      windowOpen: anyWindowOpen(windows, now),
      nextWindowOpen: next === null ? null : new Date(next).toISOString(),
      slots,
      failures,
      errors,
    };
  }

  return {
    status,
    async pause() {
      await setPaused(true).catch((err: unknown) => {
        throw refused(err, objects.namespace, POLICY_CONFIGMAP);
      });
      // What the API now holds; this agent's watch may not have seen the write yet.
      return { ...(await status()), paused: true };
    },
    async resume() {
      const cleared = await o.state.clear().catch((err: unknown) => {
        throw refused(err, objects.namespace, STATE_CONFIGMAP);
      });
      await setPaused(false).catch((err: unknown) => {
        throw refused(err, objects.namespace, POLICY_CONFIGMAP);
      });
      const s = await status();
      return { status: { ...s, paused: false, halted: false, failures: [] }, clearedFailures: cleared };
    },
  };
}
