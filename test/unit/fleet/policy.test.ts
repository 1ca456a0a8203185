import { describe, expect, it } from 'vitest';
import { MAX_SLOTS, PolicyError, isTimeZone, parsePolicy } from '../../../src/fleet/policy.js';

function fieldOf(text: string): string {
  try {
    parsePolicy(text);
  } catch (err) {
    if (err instanceof PolicyError) return err.field;
    throw err;
  }
  throw new Error('expected a PolicyError');
}

describe('fleet policy', () => {
  it('fills every default for an empty document', () => {
    const p = parsePolicy('');
    expect(p).toEqual({
      maxConcurrent: 1,
      windows: [],
      paused: false,
      maxFailures: 3,
      settleSeconds: 0,
      healthChecks: { nodeReady: true, nodeReadyTimeoutSeconds: 300, checks: [] },
    });
    expect(Object.isFrozen(p)).toBe(true);
    expect(Object.isFrozen(p.windows)).toBe(true);
  });

  it('reads YAML and JSON alike', () => {
    const yaml = parsePolicy(
      'maxConcurrent: 3\npaused: true\nwindows:\n  - days: [Sat, Sun]\n    start: "22:00"\n    end: "04:00"\n    timeZone: Europe/Berlin\n',
    );
    const json = parsePolicy(
      JSON.stringify({
        maxConcurrent: 3,
        paused: true,
        windows: [{ days: ['Sat', 'Sun'], start: '22:00', end: '04:00', timeZone: 'Europe/Berlin' }],
      }),
    );
    expect(yaml).toEqual(json);
    expect(yaml.maxConcurrent).toBe(3);
    expect(yaml.windows[0]?.timeZone).toBe('Europe/Berlin');
  });

  it('names the offending field and the value received', () => {
    expect(fieldOf('maxConcurrent: 0')).toBe('maxConcurrent');
    expect(fieldOf('maxConcurrent: 1.5')).toBe('maxConcurrent');
    expect(fieldOf('maxFailures: 0')).toBe('maxFailures');
    expect(fieldOf('settleSeconds: -1')).toBe('settleSeconds');
    expect(fieldOf('paused: "yes"')).toBe('paused');
    expect(fieldOf('windows: [{days: [Mon], start: "25:00", end: "03:00", timeZone: UTC}]')).toBe(
      'windows.0.start',
    );
    expect(fieldOf('windows: [{days: [Monday], start: "01:00", end: "03:00", timeZone: UTC}]')).toBe(
      'windows.0.days.0',
    );
    expect(fieldOf('windows: [{days: [Mon], start: "01:00", end: "03:00", timeZone: Mars/Olympus}]')).toBe(
      'windows.0.timeZone',
    );
    expect(fieldOf('windows: [{days: [Mon], start: "01:00", end: "01:00", timeZone: UTC}]')).toBe(
      'windows.0.end',
    );
    expect(fieldOf('maxConcurrnt: 2')).toBe('(root)');
    expect(fieldOf('healthChecks: {checks: [{name: Bad, exec: {command: [true]}}]}')).toBe(
      'healthChecks.checks.0',
    );
    expect(fieldOf('a: [')).toBe('policy.yaml');
    expect(() => parsePolicy('maxConcurrent: 0')).toThrow(/maxConcurrent: .*received 0/);
  });

  it('caps maxConcurrent at the slots deploy/rbac.yaml grants, and says so', () => {
    expect(MAX_SLOTS).toBe(100);
    expect(parsePolicy('maxConcurrent: 100').maxConcurrent).toBe(100);
    expect(fieldOf('maxConcurrent: 101')).toBe('maxConcurrent');
    expect(() => parsePolicy('maxConcurrent: 101')).toThrow(
      'agentd-fleet/policy.yaml: maxConcurrent: at most 100: deploy/rbac.yaml grants the slots agentd-slot-0 … agentd-slot-99 by name (received 101)',
    );
  });

  it('knows IANA zones through Intl', () => {
    expect(isTimeZone('America/New_York')).toBe(true);
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Nowhere/City')).toBe(false);
  });
});
