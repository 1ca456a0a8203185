import { describe, expect, it } from 'vitest';
import { machineSchema, parseKubeObject, podSchema } from '../../../src/kube/schemas.js';

const meta = { name: 'worker-01', uid: 'u-1', resourceVersion: '7', generation: 2 };

describe('Kubernetes object schemas', () => {
  it("parses the example Machine of docs/compatibility.md, keeping unknown fields and other controllers' sections", () => {
    const machine = parseKubeObject(machineSchema, 'Machine', {
      apiVersion: 'unbounded-cloud.io/v1alpha3',
      kind: 'Machine',
      metadata: meta,
      spec: {
        kubernetes: {
          version: 'v1.34.0',
          bootstrapTokenRef: { name: 'bootstrap-token-abc123' },
          nodeLabels: { 'unbounded-cloud.io/site': 'mysite' },
        },
        agent: {
          image: 'ghcr.io/azure/agent-ubuntu2404:v20260427',
          downloads: { kubernetes: { baseURL: 'https://m' } },
        },
        operations: { repaveCounter: 1 },
        ssh: { anything: [1, 2] },
        pxe: 'whatever',
        futureField: { x: 1 },
      },
      status: {
        phase: 'Joining',
        operations: { repaveCounter: 1 },
        conditions: [{ type: 'NodeUpdated', status: 'True', reason: 'Succeeded', observedGeneration: 3 }],
      },
    });
    expect(machine.spec.operations).toEqual({ repaveCounter: 1, rebootCounter: 0 });
    expect(machine.spec.kubernetes?.bootstrapTokenRef.name).toBe('bootstrap-token-abc123');
    expect(machine.spec.futureField).toEqual({ x: 1 });
    expect(machine.spec.ssh).toEqual({ anything: [1, 2] });
    expect(machine.status?.conditions?.[0]?.observedGeneration).toBe(3);
  });

  it('fills defaults for a bare Machine', () => {
    const machine = machineSchema.parse({ metadata: { name: 'w', uid: 'u', resourceVersion: '1' } });
    expect(machine.spec).toEqual({ operations: { repaveCounter: 0, rebootCounter: 0 } });
    expect(machine.metadata.generation).toBe(0);
    expect(machine.status).toBeUndefined();
  });

  it('names the object and field that do not fit, with expected and received', () => {
    const bad = { metadata: meta, spec: { operations: { repaveCounter: 'two' } } };
    expect(() => parseKubeObject(machineSchema, 'Machine', bad)).toThrow(
      expect.objectContaining({
        code: 'INVALID_CONFIG',
        message: expect.stringMatching(
          /^Machine worker-01: spec\.operations\.repaveCounter: .*expected number.*received string/,
        ),
        data: expect.objectContaining({ kind: 'Machine', name: 'worker-01' }),
      }),
    );
    expect(() =>
      parseKubeObject(machineSchema, 'Machine', { metadata: meta, spec: { kubernetes: { version: 'v1' } } }),
    ).toThrow(/spec\.kubernetes\.bootstrapTokenRef/);
    expect(() => parseKubeObject(podSchema, 'Pod', { metadata: { name: 'p' } })).toThrow(
      /Pod p: metadata\.namespace/,
    );
  });

  it('accepts typed client objects (Date timestamps, nulls) for pods', () => {
    const pod = podSchema.parse({
      metadata: {
        name: 'p',
        namespace: 'ns',
        creationTimestamp: new Date(),
        deletionTimestamp: null,
        labels: null,
      },
      spec: { nodeName: 'n1', volumes: [{ name: 'v', emptyDir: {} }] },
      status: { phase: 'Running' },
    });
    expect(pod.spec?.volumes?.[0]?.emptyDir).toEqual({});
  });
});
