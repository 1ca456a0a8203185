/**
 * The health gate's part of the fleet policy (docs/fleet.md, "The health gate"): what must hold
 * after `verify` before an update commits. Shared by the policy (src/fleet/policy.ts) and the gate
 * that runs the checks (src/fleet/health-gate.ts).
 */
import * as z from 'zod';

const NAME_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

const checkBase = {
  /** Shown in status, operation errors and metrics: a DNS label. */
  name: z.string().regex(NAME_RE, 'expected a DNS label (lowercase letters, digits, "-")'),
  /** How long the check may take to pass, retried until then. */
  timeoutSeconds: z.number().int().min(1).max(3600).default(60),
};

/** An HTTP GET from the host; passes on the expected status code. */
export const HttpCheckSchema = z.strictObject({
  ...checkBase,
  http: z.strictObject({
    url: z.url({ protocol: /^https?$/ }),
    expectStatus: z.number().int().min(100).max(599).default(200),
  }),
});

/** A command run inside the new machine; passes when it exits 0. */
export const ExecCheckSchema = z.strictObject({
  ...checkBase,
  exec: z.strictObject({
    command: z.array(z.string().min(1)).min(1),
  }),
});

export const HealthCheckSchema = z.union([HttpCheckSchema, ExecCheckSchema]);

export const HealthChecksSchema = z
  .strictObject({
    /** The Node object must be Ready and report the target kubelet version. */
    nodeReady: z.boolean().default(true),
    /** How long the Node may take to become Ready with the target version. */
    nodeReadyTimeoutSeconds: z.number().int().min(1).max(3600).default(300),
    checks: z.array(HealthCheckSchema).max(20).default([]),
  })
  .superRefine((v, ctx) => {
    const seen = new Set<string>();
    v.checks.forEach((c, i) => {
      if (seen.has(c.name))
        ctx.addIssue({
          code: 'custom',
          path: ['checks', i, 'name'],
          message: `duplicate check name "${c.name}"`,
        });
      seen.add(c.name);
    });
  });

export type HttpCheck = z.infer<typeof HttpCheckSchema>;
export type ExecCheck = z.infer<typeof ExecCheckSchema>;
export type HealthCheck = z.infer<typeof HealthCheckSchema>;
export type HealthChecks = z.infer<typeof HealthChecksSchema>;
