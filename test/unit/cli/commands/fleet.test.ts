import { describe, expect, it } from 'vitest';
import { renderFleetStatus } from '../../../../src/cli/commands/fleet.js';
import type { MethodTypes } from '../../../../src/rpc/methods/index.js';

type FleetStatus = MethodTypes['fleet.status']['result'];
const plain = { paint: (word: string) => word };

const base: FleetStatus = {
  namespace: 'agentd-system',
  node: 'worker-07',
  synced: true,
  present: true,
  policy: {
    maxConcurrent: 3,
    windows: [{ days: ['Sat', 'Sun'], start: '22:00', end: '04:00', timeZone: 'Europe/Berlin' }],
    paused: false,
    maxFailures: 3,
    settleSeconds: 120,
    healthChecks: {},
  },
  policyError: null,
  policyErrorField: null,
  paused: false,
  halted: false,
  windowOpen: false,
  nextWindowOpen: '2026-11-28T21:00:00.000Z',
  slots: [
    {
      name: 'agentd-slot-0',
      holder: 'worker-03',
      renewTime: 'r',
      expiresAt: '2026-11-28T22:14:05.000Z',
      expired: false,
    },
    { name: 'agentd-slot-1', holder: null, renewTime: null, expiresAt: null, expired: false },
  ],
  failures: [],
  errors: [],
};

describe('agentctl fleet status (human)', () => {
  it('shows the state, the policy, the window, the slots and their holders', () => {
    const text = renderFleetStatus(base, plain);
    expect(text).toContain('fleet      rolling  (namespace agentd-system, this node worker-07)');
    expect(text).toContain('maxConcurrent 3, maxFailures 3, settleSeconds 120');
    expect(text).toContain('closed, next opens 2026-11-28T21:00:00.000Z; Sat,Sun 22:00-04:00 Europe/Berlin');
    expect(text).toMatch(/agentd-slot-0 +worker-03 +2026-11-28T22:14:05.000Z/);
    expect(text).toMatch(/agentd-slot-1 +- +-/);
    expect(text).toContain('failures   0 of maxFailures 3');
  });

  it('says halted with the failures, a policy not applied, and no policy at all', () => {
    const halted = renderFleetStatus(
      {
        ...base,
        halted: true,
        policyError: 'agentd-fleet/policy.yaml: maxFailures: too small',
        failures: [
          { node: 'w1', operation: 'op-1', state: 'rolled_back', message: 'VERIFY_FAILED', at: 't' },
        ],
      },
      plain,
    );
    expect(halted).toContain('fleet      halted');
    expect(halted).toContain('policy     not applied: agentd-fleet/policy.yaml: maxFailures: too small');
    expect(halted).toContain('  t  w1  op-1 rolled_back: VERIFY_FAILED');
    const none = renderFleetStatus({ ...base, present: false, policy: null, slots: [] }, plain);
    expect(none).toContain('no policy (ConfigMap agentd-system/agentd-fleet absent): updates are not gated');
  });

  it('before the policy was read once, says so instead of "no policy"', () => {
    // What the daemon answers until its first list of the ConfigMap: nothing known yet.
    const unread = { ...base, synced: false, present: false, policy: null, slots: [] };
    const text = renderFleetStatus(unread, plain);
    expect(text).toContain(
      'fleet      policy not read yet (ConfigMap agentd-system/agentd-fleet, this node worker-07): updates wait in the gate until agentd has read it',
    );
    expect(text).not.toContain('no policy');
    expect(text).not.toContain('not gated');
    // The reason the read fails so far, as a read error, not as a policy that is not applied.
    const failing = renderFleetStatus(
      { ...unread, policyError: 'connect ECONNREFUSED 10.0.0.1:6443' },
      plain,
    );
    expect(failing).toContain('policy     cannot read: connect ECONNREFUSED 10.0.0.1:6443');
    expect(failing).not.toContain('not applied');
  });

  it("after an operator's pause: says whose credentials read it, not a node", () => {
    const { node: _node, ...view } = base;
    const operator = { ...view, paused: true, kubeconfig: { context: 'prod-admin' } };
    expect(renderFleetStatus(operator, plain)).toContain(
      'fleet      paused  (namespace agentd-system, read with context prod-admin)',
    );
    // The policy could not be read back after the change: no word of agentd's gate waiting.
    const unread = renderFleetStatus(
      { ...operator, synced: false, present: false, policy: null, policyError: 'get ConfigMap …: forbidden' },
      plain,
    );
    expect(unread).toContain(
      'fleet      policy not read (ConfigMap agentd-system/agentd-fleet, read with context prod-admin)',
    );
    expect(unread).toContain('policy     cannot read: get ConfigMap …: forbidden');
    expect(unread).not.toContain('agentd has read it');
  });
});
