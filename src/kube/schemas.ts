/**
 * zod schemas of the Kubernetes objects agentd reads (the client hands back untyped data):
 * the Machine custom resource in full (per docs/compatibility.md; unknown fields are kept, `ssh`/`pxe`
 * belong to other controllers and are not looked at), and only the fields of Node, Pod and
 * PodDisruptionBudget that agentd uses. Everything read from the API goes through
 * `parseKubeObject`, which names the object and the field when it does not fit.
 */
import * as z from 'zod';
import { InvalidConfigError } from '../errors.js';

/** Default API group of the Machine CRD (`unbounded-kube.io` on clusters older than April 2026). */
export const DEFAULT_CRD_GROUP = 'unbounded-cloud.io';
export const MACHINE_VERSION = 'v1alpha3';
export const MACHINE_PLURAL = 'machines';
export const MACHINE_KIND = 'Machine';

/** Values of `status.phase` (other controllers write it too). */
export const MACHINE_PHASES = ['Pending', 'Rebooting', 'Provisioning', 'Joining', 'Ready', 'Failed'] as const;
export type MachinePhase = (typeof MACHINE_PHASES)[number];

/** The condition type agentd owns in `status.conditions`. */
export const NODE_UPDATED_CONDITION = 'NodeUpdated';

// The typed core clients turn timestamps into Date objects; raw custom objects keep strings.
const timestampSchema = z.union([z.string(), z.date()]);
const counterSchema = z.number().int().nonnegative();
const stringMapSchema = z.record(z.string(), z.string());

const ownerReferenceSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string(),
  name: z.string(),
  uid: z.string().optional(),
  controller: z.boolean().nullish(),
});

const objectMetaSchema = z.looseObject({
  name: z.string().min(1),
  namespace: z.string().nullish(),
  uid: z.string().nullish(),
  resourceVersion: z.string().nullish(),
  generation: z.number().int().nullish(),
  creationTimestamp: timestampSchema.nullish(),
  deletionTimestamp: timestampSchema.nullish(),
  labels: stringMapSchema.nullish(),
  annotations: stringMapSchema.nullish(),
  ownerReferences: z.array(ownerReferenceSchema).nullish(),
});

const downloadSchema = z.looseObject({
  baseURL: z.string().optional(),
  url: z.string().optional(),
  version: z.string().optional(),
});

/** `spec` of a Machine; `operations` counters default to 0 so readers never see them missing. */
export const machineSpecSchema = z.looseObject({
  kubernetes: z
    .looseObject({
      version: z.string().optional(),
      nodeLabels: stringMapSchema.optional(),
      registerWithTaints: z.array(z.string()).optional(),
      bootstrapTokenRef: z.looseObject({ name: z.string().min(1) }),
      nodeRef: z.looseObject({ name: z.string() }).optional(),
    })
    .optional(),
  agent: z
    .looseObject({
      image: z.string().optional(),
      version: z.string().optional(),
      baseURL: z.string().optional(),
      url: z.string().optional(),
      downloads: z
        .looseObject({
          kubernetes: downloadSchema.optional(),
          containerd: downloadSchema.optional(),
          runc: downloadSchema.optional(),
          cni: downloadSchema.optional(),
          crictl: downloadSchema.optional(),
        })
        .optional(),
    })
    .optional(),
  operations: z
    .looseObject({ repaveCounter: counterSchema.default(0), rebootCounter: counterSchema.default(0) })
    .default({ repaveCounter: 0, rebootCounter: 0 }),
});

/** One entry of `status.conditions` (the standard metav1.Condition fields). */
export const machineConditionSchema = z.looseObject({
  type: z.string().min(1),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: z.string().optional(),
  observedGeneration: z.number().int().optional(),
});
export type MachineCondition = z.output<typeof machineConditionSchema>;

export const machineStatusSchema = z.looseObject({
  // A plain string: a phase some newer controller invents must not make the Machine unreadable.
  phase: z.string().optional(),
  message: z.string().optional(),
  agent: z.looseObject({ image: z.string().optional() }).optional(),
  operations: z
    .looseObject({ repaveCounter: counterSchema.optional(), rebootCounter: counterSchema.optional() })
    .optional(),
  conditions: z.array(machineConditionSchema).optional(),
});

/** A Machine as read from the API: metadata with the server-set fields agentd relies on. */
export const machineSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: objectMetaSchema.extend({
    uid: z.string().min(1),
    resourceVersion: z.string().min(1),
    generation: z.number().int().nonnegative().default(0),
  }),
  spec: machineSpecSchema.default({ operations: { repaveCounter: 0, rebootCounter: 0 } }),
  status: machineStatusSchema.optional(),
});
/** A validated Machine custom resource. */
export type Machine = z.output<typeof machineSchema>;
export type MachineSpec = z.output<typeof machineSpecSchema>;
export type MachineStatus = z.output<typeof machineStatusSchema>;

/** The parts of a Node that cordon/uncordon read. */
export const nodeSchema = z.looseObject({
  metadata: objectMetaSchema,
  spec: z.looseObject({ unschedulable: z.boolean().nullish() }).nullish(),
});
export type KubeNode = z.output<typeof nodeSchema>;

/** The parts of a Pod that drain reads: owners, mirror annotation, emptyDir volumes, phase. */
export const podSchema = z.looseObject({
  metadata: objectMetaSchema.extend({ namespace: z.string().min(1) }),
  spec: z
    .looseObject({
      nodeName: z.string().nullish(),
      volumes: z.array(z.looseObject({ name: z.string(), emptyDir: z.unknown().optional() })).nullish(),
    })
    .nullish(),
  status: z.looseObject({ phase: z.string().nullish() }).nullish(),
});
export type KubePod = z.output<typeof podSchema>;

/** The parts of a PodDisruptionBudget worth reporting when it blocks an eviction. */
export const podDisruptionBudgetSchema = z.looseObject({
  metadata: objectMetaSchema.extend({ namespace: z.string().min(1) }),
  spec: z.looseObject({ selector: z.unknown().optional() }).nullish(),
  status: z.looseObject({ disruptionsAllowed: z.number().int().nullish() }).nullish(),
});
export type KubePodDisruptionBudget = z.output<typeof podDisruptionBudgetSchema>;

function nameOf(value: unknown): string {
  if (typeof value !== 'object' || value === null) return '(unnamed)';
  const meta = (value as { metadata?: unknown }).metadata;
  if (typeof meta !== 'object' || meta === null) return '(unnamed)';
  const { name, namespace } = meta as { name?: unknown; namespace?: unknown };
  const base = typeof name === 'string' ? name : '(unnamed)';
  return typeof namespace === 'string' && namespace !== '' ? `${namespace}/${base}` : base;
}

/**
 * Validate an object read from the API. Throws `InvalidConfigError` naming the kind, the object
 * and the first offending field (all issues are in `data.issues`).
 */
export function parseKubeObject<S extends z.ZodType>(schema: S, kind: string, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const name = nameOf(value);
  const issues = result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  const first = issues[0];
  throw new InvalidConfigError(
    `${kind} ${name}: ${first ? `${first.path || '(root)'}: ${first.message}` : 'does not match its schema'}`,
    { data: { kind, name, issues } },
  );
}
