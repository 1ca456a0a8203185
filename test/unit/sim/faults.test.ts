import { describe, expect, it } from 'vitest';
import { AgentError } from '../../../src/errors.js';
import { hasSimFault, parseSimFaults, simLatencyMs, simMemAvailable } from '../../../src/sim/faults.js';

function parseError(spec: string): AgentError {
  try {
    parseSimFaults(spec);
  } catch (err) {
    expect(err).toBeInstanceOf(AgentError);
    return err as AgentError;
  }
  throw new Error(`expected ${JSON.stringify(spec)} to be rejected`);
}

describe('parseSimFaults', () => {
  it('parses every fault kind and machine target', () => {
    expect(parseSimFaults('start-fails:kube1, kubelet-inactive:*,latency=250:kube2')).toEqual([
      { kind: 'start-fails', machine: 'kube1' },
      { kind: 'kubelet-inactive', machine: '*' },
      { kind: 'latency', machine: 'kube2', ms: 250 },
    ]);
  });

  it("low-memory is the host's: 64 MiB available with it, 16 GiB without; a machine target is refused", () => {
    expect(simMemAvailable(parseSimFaults('low-memory:*'))).toBe(64 * 1024 ** 2);
    expect(simMemAvailable(parseSimFaults('start-fails:kube2'))).toBe(16 * 1024 ** 3);
    expect(parseError('low-memory:kube1').message).toMatch(
      /low-memory applies to the host: write low-memory:\*/,
    );
  });

  it('treats an empty value and empty items as no faults', () => {
    expect(parseSimFaults('')).toEqual([]);
    expect(parseSimFaults(' , start-fails:kube2,')).toEqual([{ kind: 'start-fails', machine: 'kube2' }]);
  });

  it.each([
    ['start-fails', /expected <fault>:<machine>/],
    ['start-fails:kube1:x', /expected <fault>:<machine>/],
    ['start-fails:kube3', /machine must be kube1, kube2 or \*, got "kube3"/],
    [
      'explode:kube1',
      /unknown fault "explode"; expected start-fails, kubelet-inactive, low-memory or latency=<ms>/,
    ],
    ['latency=fast:kube1', /latency must be a whole number of milliseconds/],
    ['latency=-5:*', /latency must be a whole number/],
  ])('rejects %j with INVALID_CONFIG naming the entry', (spec, message) => {
    const err = parseError(spec);
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.message).toContain(`AGENTD_SIM_FAULTS entry ${JSON.stringify(spec)}`);
    expect(err.message).toMatch(message);
  });
});

describe('fault lookup', () => {
  const faults = parseSimFaults('kubelet-inactive:kube2,latency=100:*,latency=300:kube1');

  it('matches a fault to its machine or to both with *', () => {
    expect(hasSimFault(faults, 'kubelet-inactive', 'kube2')).toBe(true);
    expect(hasSimFault(faults, 'kubelet-inactive', 'kube1')).toBe(false);
    expect(hasSimFault(faults, 'start-fails', 'kube1')).toBe(false);
  });

  it('uses the largest latency that applies', () => {
    expect(simLatencyMs(faults, 'kube1')).toBe(300);
    expect(simLatencyMs(faults, 'kube2')).toBe(100);
    expect(simLatencyMs([], 'kube2')).toBe(0);
  });
});
