/** The wire shape of the fleet status (`fleet.status`, `fleet.pause`, `fleet.resume`; docs/fleet.md). */
import * as z from 'zod';

const windowSchema = z.object({
  days: z.array(z.string()),
  start: z.string(),
  end: z.string(),
  timeZone: z.string(),
});

export const fleetStatusSchema = z
  .object({
    namespace: z.string(),
    node: z.string().meta({ description: "This agent's holder identity (its Machine name)." }),
    synced: z.boolean().meta({ description: 'The policy ConfigMap has been read at least once.' }),
    present: z.boolean().meta({ description: 'The agentd-fleet ConfigMap exists: updates pass the gate.' }),
    policy: z
      .object({
        maxConcurrent: z.number().int(),
        windows: z.array(windowSchema),
        paused: z.boolean(),
        maxFailures: z.number().int(),
        settleSeconds: z.number().int(),
        healthChecks: z.record(z.string(), z.unknown()),
      })
      .nullable()
      .meta({ description: 'The policy in force, defaults filled in; null: no ConfigMap, no gate.' }),
    policyError: z
      .string()
      .nullable()
      .meta({ description: 'Why the ConfigMap content is not in force (the last good policy holds).' }),
    policyErrorField: z.string().nullable(),
    paused: z.boolean(),
    halted: z.boolean().meta({ description: 'Recorded failures reached maxFailures: no slot is taken.' }),
    windowOpen: z.boolean().meta({ description: 'A maintenance window is open now (or there are none).' }),
    nextWindowOpen: z.string().nullable(),
    slots: z.array(
      z.object({
        name: z.string(),
        holder: z.string().nullable(),
        renewTime: z.string().nullable(),
        expiresAt: z.string().nullable(),
        expired: z.boolean(),
      }),
    ),
    failures: z.array(
      z.object({
        node: z.string(),
        operation: z.string(),
        state: z.string(),
        message: z.string(),
        at: z.string(),
      }),
    ),
    errors: z.array(z.string()).meta({ description: 'What could not be read (slots, failures).' }),
  })
  .meta({ id: 'FleetStatus', description: 'The fleet gate as this node sees it (docs/fleet.md).' });
