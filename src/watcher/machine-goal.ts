/**
 * What a Machine asks of this node, compared with what the node runs (docs/watcher.md): a repave when
 * `spec.operations.repaveCounter` is ahead of `status.operations.repaveCounter`, an ordinary
 * update when the spec's Kubernetes version, image, node labels or taints differ from the
 * applied config. Pure functions: the reconciler does the I/O.
 */
import * as z from 'zod';
import type { Machine } from '../kube/index.js';
import { InvalidConfigError } from '../errors.js';

/** The parts of the applied config the Machine spec can change (read from `config.get`). */
export interface AppliedView {
  kubernetesVersion: string;
  image: string;
  nodeLabels: Record<string, string>;
  registerWithTaints: string[];
}

/** The `set` of an `update` call: only the fields the Machine spec carries. */
export interface MachineGoalSet {
  kubernetesVersion?: string;
  image?: string;
  nodeLabels?: Record<string, string>;
  registerWithTaints?: string[];
}

/** One field where the spec and the applied config differ. */
export interface MachineDrift {
  field: keyof MachineGoalSet;
  applied: unknown;
  wanted: unknown;
}

/** What the reconciler should do about a Machine. */
export interface MachineDecision {
  /** The counter moved: re-provision even when nothing differs (`update` with `force`). */
  repave: boolean;
  /** `spec.operations.repaveCounter`: what a successful update acknowledges. */
  requestedCounter: number;
  /** `status.operations.repaveCounter` as read. */
  acknowledgedCounter: number;
  set: MachineGoalSet;
  drift: MachineDrift[];
  /** The update's idempotency key: the Machine's uid, generation and counter. */
  idempotencyKey: string;
}

const appliedSchema = z.looseObject({
  Cluster: z.looseObject({ Version: z.string() }),
  OCIImage: z.string(),
  Kubelet: z.looseObject({
    Labels: z.record(z.string(), z.string()).default({}),
    RegisterWithTaints: z.array(z.string()).default([]),
  }),
});

/** The fields the watcher compares, out of the (redacted) applied config `config.get` returns. */
export function readAppliedView(config: Record<string, unknown>): AppliedView {
  const parsed = appliedSchema.safeParse(config);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidConfigError(
      `config.get returned an applied config without ${issue ? issue.path.join('.') : 'the expected fields'}: ${issue?.message ?? ''}`,
      { data: { issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) } },
    );
  }
  const c = parsed.data;
  return {
    kubernetesVersion: stripV(c.Cluster.Version),
    image: c.OCIImage,
    nodeLabels: c.Kubelet.Labels,
    registerWithTaints: c.Kubelet.RegisterWithTaints,
  };
}

function stripV(version: string): string {
  return version.replace(/^v/, '');
}

/** The update `set` a Machine spec asks for (fields it leaves out are left as they are). */
export function goalSetFromSpec(machine: Machine): MachineGoalSet {
  const k = machine.spec.kubernetes;
  const set: MachineGoalSet = {};
  if (k?.version) set.kubernetesVersion = stripV(k.version);
  if (machine.spec.agent?.image) set.image = machine.spec.agent.image;
  if (k?.nodeLabels !== undefined) set.nodeLabels = { ...k.nodeLabels };
  if (k?.registerWithTaints !== undefined) set.registerWithTaints = [...k.registerWithTaints];
  return set;
}

function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

// Taint order means nothing to the kubelet: comparing sorted avoids a repave for a reordering.
function sameTaints(a: readonly string[], b: readonly string[]): boolean {
  const sa = [...a].sort();
  const sb = [...b].sort();
  return sa.length === sb.length && sa.every((t, i) => t === sb[i]);
}

/** Whether two goal sets ask for the same thing (labels as a map, taints as a set). */
export function sameGoalSet(a: MachineGoalSet, b: MachineGoalSet): boolean {
  const same = <T>(x: T | undefined, y: T | undefined, eq: (p: T, q: T) => boolean): boolean =>
    x === undefined || y === undefined ? x === y : eq(x, y);
  return (
    a.kubernetesVersion === b.kubernetesVersion &&
    a.image === b.image &&
    same(a.nodeLabels, b.nodeLabels, sameLabels) &&
    same(a.registerWithTaints, b.registerWithTaints, sameTaints)
  );
}

/** Where the spec's goal differs from the applied config. */
export function diffGoal(set: MachineGoalSet, applied: AppliedView): MachineDrift[] {
  const drift: MachineDrift[] = [];
  if (set.kubernetesVersion !== undefined && set.kubernetesVersion !== applied.kubernetesVersion)
    drift.push({
      field: 'kubernetesVersion',
      applied: applied.kubernetesVersion,
      wanted: set.kubernetesVersion,
    });
  if (set.image !== undefined && set.image !== applied.image)
    drift.push({ field: 'image', applied: applied.image, wanted: set.image });
  if (set.nodeLabels !== undefined && !sameLabels(set.nodeLabels, applied.nodeLabels))
    drift.push({ field: 'nodeLabels', applied: applied.nodeLabels, wanted: set.nodeLabels });
  if (set.registerWithTaints !== undefined && !sameTaints(set.registerWithTaints, applied.registerWithTaints))
    drift.push({
      field: 'registerWithTaints',
      applied: applied.registerWithTaints,
      wanted: set.registerWithTaints,
    });
  return drift;
}

/** The idempotency key of the update for this Machine state. */
export function machineIdempotencyKey(machine: Machine): string {
  const m = machine.metadata;
  return `machine/${m.uid}/gen-${m.generation}/repave-${machine.spec.operations.repaveCounter}`;
}

/** Decide what the Machine asks for. */
export function decideMachine(machine: Machine, applied: AppliedView): MachineDecision {
  const requestedCounter = machine.spec.operations.repaveCounter;
  const acknowledgedCounter = machine.status?.operations?.repaveCounter ?? 0;
  const set = goalSetFromSpec(machine);
  return {
    repave: requestedCounter > acknowledgedCounter,
    requestedCounter,
    acknowledgedCounter,
    set,
    drift: diffGoal(set, applied),
    idempotencyKey: machineIdempotencyKey(machine),
  };
}

/** A short human summary for logs, the operation reason and the condition message. */
export function describeDecision(d: MachineDecision): string {
  const parts: string[] = [];
  if (d.repave)
    parts.push(`repave requested (repaveCounter ${d.acknowledgedCounter} → ${d.requestedCounter})`);
  for (const x of d.drift)
    parts.push(`${x.field} ${JSON.stringify(x.applied)} → ${JSON.stringify(x.wanted)}`);
  return parts.join('; ');
}
