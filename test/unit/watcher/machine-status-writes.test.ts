import { describe, expect, it } from 'vitest';
import { machineSchema } from '../../../src/kube/schemas.js';
import type { Machine } from '../../../src/kube/schemas.js';
import { clip, statusMutation } from '../../../src/watcher/machine-status-writes.js';

function machine(status: Record<string, unknown>): Machine {
  return machineSchema.parse({
    metadata: { name: 'w1', uid: 'u', resourceVersion: '1', generation: 4 },
    status,
  });
}

describe('statusMutation', () => {
  const succeeded = { status: 'True' as const, reason: 'Succeeded', message: 'done' };

  it('writes nothing when the Machine already says it', () => {
    const m = machine({
      phase: 'Joining',
      operations: { repaveCounter: 3 },
      agent: { image: 'img' },
      conditions: [
        { type: 'NodeUpdated', status: 'True', reason: 'Succeeded', message: 'done', observedGeneration: 4 },
      ],
    });
    expect(
      statusMutation({
        phase: 'Joining',
        repaveCounter: 3,
        agentImage: 'img',
        nodeUpdated: succeeded,
        message: null,
      })(m),
    ).toBeNull();
  });

  it('never lowers the acknowledged counter', () => {
    expect(statusMutation({ repaveCounter: 2 })(machine({ operations: { repaveCounter: 3 } }))).toBeNull();
    expect(statusMutation({ repaveCounter: 4 })(machine({ operations: { repaveCounter: 3 } }))).toEqual({
      repaveCounter: 4,
    });
  });

  it('clears status.message only when agentd wrote it', () => {
    expect(statusMutation({ message: null })(machine({ message: 'machina: rebooting' }))).toBeNull();
    expect(statusMutation({ message: null })(machine({ message: 'agentd: update op-1 failed' }))).toEqual({
      message: null,
    });
  });

  it('rewrites the condition when its generation is stale', () => {
    const m = machine({
      conditions: [
        { type: 'NodeUpdated', status: 'True', reason: 'Succeeded', message: 'done', observedGeneration: 3 },
      ],
    });
    expect(statusMutation({ nodeUpdated: succeeded })(m)).toEqual({ nodeUpdated: succeeded });
  });

  it('clips long messages', () => {
    expect(clip('x'.repeat(2000))).toHaveLength(1000);
    expect(clip('short')).toBe('short');
  });
});
