import { describe, expect, it } from 'vitest';
import {
  renderOperation,
  renderOperationList,
  renderPlan,
  renderPodResult,
  routeOf,
} from '../../../../src/cli/render/operation.js';
import { T0, iso, makeOperation, phase } from '../follow/fixtures.js';

const plain = (w: string): string => w;

describe('renderOperation', () => {
  it('header, requester, phases with durations and the first line of errors', () => {
    const op = makeOperation({
      state: 'rolled_back',
      finishedAt: iso(4000),
      phases: [
        phase('preflight', 'succeeded', { startedAt: iso(0), finishedAt: iso(1000) }),
        phase('start', 'failed', {
          startedAt: iso(1000),
          finishedAt: iso(3000),
          error: { code: 'COMMAND_FAILED', message: 'machinectl start kube2: exit 1\nsee the journal' },
        }),
        phase('verify', 'skipped'),
      ],
      error: { code: 'COMMAND_FAILED', message: 'machinectl start kube2: exit 1' },
    });
    expect(renderOperation(op, plain, T0 + 10_000)).toBe(
      [
        'update op-1  rolled_back  kube1 → kube2  took 4.0s',
        'requested by agentctl at 2026-03-01T12:00:00.000Z',
        '',
        'PHASE      STATE      TOOK  ERROR',
        'preflight  succeeded  1.0s',
        'start      failed     2.0s  COMMAND_FAILED: machinectl start kube2: exit 1',
        'verify     skipped',
        '',
        'error COMMAND_FAILED: machinectl start kube2: exit 1',
      ].join('\n'),
    );
  });

  it('says when an update changed nothing', () => {
    const op = makeOperation({ state: 'succeeded', phases: [], result: { changed: false } });
    expect(renderOperation(op, plain, T0)).toContain('nothing to change');
  });

  it('a drain lists evicted, skipped and remaining pods; no machine route', () => {
    const op = makeOperation({
      kind: 'drain',
      from: 'kube1',
      to: 'kube1',
      state: 'failed',
      phases: [],
      result: {
        evicted: [{ namespace: 'a', name: 'web-1' }],
        skipped: [{ namespace: 'kube-system', name: 'ds-1', reason: 'DaemonSet' }],
        remaining: [],
      },
    });
    const text = renderOperation(op, plain, T0);
    expect(text.split('\n')[0]).toBe('drain op-1  failed  took 0.0s');
    expect(text).toContain('evicted: 1\n  a/web-1');
    expect(text).toContain('skipped: 1\n  kube-system/ds-1 (DaemonSet)');
    expect(text).toContain('remaining: 0');
  });

  it('an uncordon says its outcome', () => {
    const op = makeOperation({
      kind: 'uncordon',
      phases: [],
      result: { uncordoned: false, outcome: 'cordoned-by-other' },
    });
    expect(renderOperation(op, plain, T0)).toContain('outcome: cordoned-by-other');
  });
});

describe('renderOperationList', () => {
  it('one aligned row per operation', () => {
    const ops = [
      makeOperation({ id: 'op-2', state: 'running' }),
      makeOperation({ id: 'op-1', state: 'succeeded', from: null, to: 'kube1', finishedAt: iso(2000) }),
    ];
    expect(renderOperationList(ops, plain, T0 + 60_000)).toBe(
      [
        'ID    KIND    STATE      ROUTE           CREATED    TOOK   BY',
        'op-2  update  running    kube1 → kube2   1m 0s ago  1m 0s  agentctl',
        'op-1  update  succeeded  (none) → kube1  1m 0s ago  2.0s   agentctl',
      ].join('\n'),
    );
    expect(renderOperationList([], plain, T0)).toBe('no operations');
  });
});

describe('renderPlan', () => {
  it('what would change, the phases, the files written and removed', () => {
    const op = makeOperation({
      state: 'succeeded',
      result: {
        dryRun: true,
        changed: true,
        plan: {
          from: 'kube1',
          to: 'kube2',
          changes: [{ path: 'Cluster.Version', from: '1.34.0', to: '1.35.0' }],
          phases: ['preflight', 'provision'],
          files: ['/var/lib/machines/kube2'],
          removes: ['/var/lib/machines/kube1'],
          configHash: 'abc',
        },
      },
    });
    expect(renderPlan(op)).toBe(
      [
        'dry run: kube1 → kube2; nothing was changed',
        '',
        'changes:',
        '  Cluster.Version: "1.34.0" → "1.35.0"',
        '',
        'phases: preflight, provision',
        '',
        'would write:',
        '  /var/lib/machines/kube2',
        '',
        'would remove:',
        '  /var/lib/machines/kube1',
        '',
        'config hash abc',
      ].join('\n'),
    );
  });

  it('a dry run that changes nothing says so', () => {
    expect(renderPlan(makeOperation({ result: { dryRun: true, changed: false } }))).toContain(
      'nothing to change',
    );
  });
});

describe('routeOf and renderPodResult', () => {
  it('no route for drain and uncordon, or without machines', () => {
    expect(routeOf({ kind: 'update', from: null, to: 'kube1' })).toBe('(none) → kube1');
    expect(routeOf({ kind: 'reset', from: 'kube2', to: null })).toBe('kube2 → (none)');
    expect(routeOf({ kind: 'uncordon', from: 'kube1', to: 'kube1' })).toBe('');
    expect(routeOf({ kind: 'reset', from: null, to: null })).toBe('');
  });

  it('caps long pod lists and accepts plain names', () => {
    const lines = renderPodResult({ evicted: Array.from({ length: 52 }, (_, i) => `p${i}`) });
    expect(lines).toContain('evicted: 52');
    expect(lines.at(-1)).toBe('  … 2 more (see --json)');
  });
});
