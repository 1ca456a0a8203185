/**
 * The fleet policy (docs/fleet.md, "The policy"): the `policy.yaml` key of the ConfigMap
 * `agentd-fleet`, parsed (YAML or JSON) and validated once here, with its defaults filled in and
 * frozen. A policy that does not validate is rejected whole: the caller keeps the last good one.
 */
import { parse as parseYaml } from 'yaml';
import * as z from 'zod';
import { HealthChecksSchema } from './health-checks-schema.js';

/** The ConfigMap holding the policy, and its data key. */
export const POLICY_CONFIGMAP = 'agentd-fleet';
export const POLICY_KEY = 'policy.yaml';
/** The ConfigMap where agents record failed updates (docs/fleet.md, "Pause and halt"). */
export const STATE_CONFIGMAP = 'agentd-fleet-state';
/** Slot leases are named `agentd-slot-<i>`, i < maxConcurrent. */
export const SLOT_PREFIX = 'agentd-slot-';
/**
 * The most slots a policy may ask for: deploy/rbac.yaml grants get/update on exactly the Leases
 * agentd-slot-0 … agentd-slot-99 (RBAC names objects one by one; a test keeps the two in step).
 * More than 100 nodes down at once is more than one rollout should take; a larger fleet runs
 * several, each in its own namespace (--fleet-namespace).
 */
export const MAX_SLOTS = 100;

export const WEEKDAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

const HHMM_RE = /^([01]\d|2[0-3]):[0-5]\d$/;

/** Whether `zone` is an IANA time zone this runtime knows (Intl throws a RangeError otherwise). */
export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

export const windowSchema = z
  .strictObject({
    days: z
      .array(z.enum(WEEKDAYS))
      .min(1)
      .meta({ description: 'Days the window starts on (Mon..Sun), in its time zone.' }),
    start: z.string().regex(HHMM_RE, 'expected HH:MM (00:00-23:59)'),
    end: z.string().regex(HHMM_RE, 'expected HH:MM (00:00-23:59)'),
    timeZone: z
      .string()
      .refine(isTimeZone, { message: 'expected an IANA time zone such as Europe/Berlin or UTC' }),
  })
  .refine((w) => w.start !== w.end, { message: 'start and end are equal: an empty window', path: ['end'] })
  .meta({ description: 'A maintenance window; an end before the start crosses midnight.' });

export const fleetPolicySchema = z
  .strictObject({
    maxConcurrent: z
      .number()
      .int()
      .min(1)
      .max(MAX_SLOTS, {
        message: `at most ${MAX_SLOTS}: deploy/rbac.yaml grants the slots ${SLOT_PREFIX}0 … ${SLOT_PREFIX}${MAX_SLOTS - 1} by name`,
      })
      .default(1),
    windows: z.array(windowSchema).max(50).default([]),
    paused: z.boolean().default(false),
    maxFailures: z.number().int().min(1).max(100_000).default(3),
    settleSeconds: z.number().int().min(0).max(86_400).default(0),
    healthChecks: HealthChecksSchema.default({ nodeReady: true, nodeReadyTimeoutSeconds: 300, checks: [] }),
  })
  .meta({ id: 'FleetPolicy', description: 'The fleet policy (docs/fleet.md).' });

export type MaintenanceWindow = z.infer<typeof windowSchema>;
export type FleetPolicy = Readonly<z.infer<typeof fleetPolicySchema>>;

/** A policy that did not validate: `field` is the first offending path (e.g. `windows.0.timeZone`). */
export class PolicyError extends Error {
  constructor(
    message: string,
    readonly field: string,
  ) {
    super(message);
    this.name = 'PolicyError';
  }
}

/**
 * Parse and validate the `policy.yaml` text. Throws `PolicyError` naming the field, what was
 * expected and what was received; returns a frozen policy with every default filled in.
 */
export function parsePolicy(text: string): FleetPolicy {
  let raw: unknown;
  try {
    raw = parseYaml(text, { prettyErrors: true });
  } catch (err) {
    throw new PolicyError(
      `${POLICY_CONFIGMAP}/${POLICY_KEY}: not YAML or JSON: ${err instanceof Error ? err.message : String(err)}`,
      POLICY_KEY,
    );
  }
  // An empty document is the default policy.
  if (raw === null || raw === undefined) raw = {};
  const r = fleetPolicySchema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0];
    const field = issue?.path.length ? issue.path.join('.') : '(root)';
    const value = issue?.path.length ? valueAt(raw, issue.path) : raw;
    throw new PolicyError(
      `${POLICY_CONFIGMAP}/${POLICY_KEY}: ${field}: ${issue?.message ?? 'invalid'} (received ${JSON.stringify(value) ?? 'nothing'})`,
      field,
    );
  }
  return deepFreeze(r.data);
}

function valueAt(value: unknown, path: ReadonlyArray<PropertyKey>): unknown {
  let v = value;
  for (const key of path) {
    if (typeof v !== 'object' || v === null) return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
