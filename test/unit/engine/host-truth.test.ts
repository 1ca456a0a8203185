/**
 * Trust the host over the files (issue 40): the checker of what node.json, the journal and the
 * applied configs claim against which machine runs and serves, and the guard before a machine
 * is stopped or removed.
 */
import { describe, expect, it } from 'vitest';
import {
  checkStateFiles,
  describeNode,
  observeHost,
  refuseDestroy,
  servingMachine,
  type AppliedState,
  type HostFacts,
  type MachineFacts,
  type StateClaims,
} from '../../../src/engine/host-truth.js';
import type { MachineInspection } from '../../../src/host/machines.js';
import type { MachineName } from '../../../src/host/types.js';
import { makeJournal } from './fakes.js';

type Shape = 'serving' | 'running' | 'stopped' | 'absent' | 'unknown';

function machine(name: MachineName, shape: Shape): MachineFacts {
  if (shape === 'unknown')
    return { name, known: false, exists: true, running: true, serving: true, error: 'EMFILE' };
  return {
    name,
    known: true,
    exists: shape !== 'absent',
    running: shape === 'serving' || shape === 'running',
    serving: shape === 'serving',
  };
}

const host = (kube1: Shape, kube2: Shape): HostFacts => ({
  kube1: machine('kube1', kube1),
  kube2: machine('kube2', kube2),
});

function claims(o: Partial<StateClaims> & { kube1?: AppliedState; kube2?: AppliedState } = {}): StateClaims {
  return {
    nodeActive: 'nodeActive' in o ? o.nodeActive : 'kube1',
    journal: o.journal ?? null,
    applied: { kube1: o.kube1 ?? 'verified', kube2: o.kube2 ?? 'missing' },
  };
}

describe('checkStateFiles', () => {
  it('files that agree with the host: nothing to say', () => {
    expect(checkStateFiles(claims(), host('serving', 'absent'))).toEqual([]);
    // A stopped active machine is repair's business, not a disagreement.
    expect(checkStateFiles(claims(), host('stopped', 'absent'))).toEqual([]);
    // No node.json yet (a node taken over): nothing claimed.
    expect(checkStateFiles(claims({ nodeActive: undefined }), host('serving', 'absent'))).toEqual([]);
    // node.json names no machine (after a reset).
    expect(checkStateFiles(claims({ nodeActive: null, kube1: 'missing' }), host('absent', 'absent'))).toEqual(
      [],
    );
  });

  it('node.json names kube1 while kube2 serves (kube1 stopped): names node.json and what the host shows', () => {
    const found = checkStateFiles(claims({ kube2: 'verified' }), host('stopped', 'serving'));
    expect(found).toEqual([
      {
        file: 'node.json',
        against: 'host',
        serving: 'kube2',
        message:
          'node.json names kube1 as the active machine, but kube1 is stopped and kube2 runs and serves',
      },
    ]);
  });

  it('node.json names a machine the host does not have, while the other runs', () => {
    const found = checkStateFiles(claims({ kube1: 'missing', kube2: 'verified' }), host('absent', 'running'));
    expect(found[0]?.message).toBe(
      'node.json names kube1 as the active machine, but the host has no machine kube1 and kube2 runs',
    );
  });

  it('node.json names a machine the host does not have and nothing else runs: an update --force may provision it', () => {
    expect(checkStateFiles(claims(), host('absent', 'absent'))).toEqual([]);
  });

  it('node.json names a machine without an applied config', () => {
    expect(checkStateFiles(claims({ kube1: 'missing' }), host('serving', 'absent'))).toEqual([
      {
        file: 'node.json',
        against: 'applied-config',
        serving: 'kube1',
        message: 'node.json names kube1 as the active machine, but kube1 has no applied config',
      },
    ]);
  });

  it('a closed journal that committed kube2 against a node.json naming kube1', () => {
    const journal = makeJournal({ closed: true, committed: true, outcome: 'succeeded', phase: 'uncordon' });
    const found = checkStateFiles(claims({ journal, kube2: 'verified' }), host('serving', 'absent'));
    expect(found.map((f) => [f.file, f.against, f.message])).toEqual([
      [
        'journal.json',
        'node.json',
        'journal.json says the last update committed kube2, but node.json names kube1',
      ],
    ]);
    // A rolled-back update's journal committed nothing: no disagreement.
    const rolledBack = makeJournal({ closed: true, outcome: 'rolled_back' });
    expect(checkStateFiles(claims({ journal: rolledBack }), host('serving', 'absent'))).toEqual([]);
  });

  it('an open journal naming a source the host does not have, while the target serves', () => {
    const journal = makeJournal({ source: 'kube1', target: 'kube2' });
    const found = checkStateFiles(
      claims({ nodeActive: 'kube2', journal, kube1: 'missing', kube2: 'verified' }),
      host('absent', 'serving'),
    );
    expect(found.map((f) => f.message)).toEqual([
      'the open journal.json names kube1 as the source, but the host has no machine kube1 and no applied config of it, and kube2 runs and serves',
    ]);
  });

  it('an open committed journal naming a target the host does not have', () => {
    const journal = makeJournal({ committed: true, phase: 'cleanup' });
    const found = checkStateFiles(
      claims({ nodeActive: 'kube1', journal, kube2: 'missing' }),
      host('serving', 'absent'),
    );
    expect(found.map((f) => f.message)).toEqual([
      'the open journal.json names kube2 as the committed target, but the host has no machine kube2 and no applied config of it, and kube1 runs and serves',
    ]);
  });

  it('a machine the host cannot be asked about is not judged', () => {
    expect(checkStateFiles(claims({ kube2: 'verified' }), host('unknown', 'serving'))).toEqual([]);
  });
});

describe('refuseDestroy', () => {
  it('never the machine that serves while the other does not', () => {
    expect(refuseDestroy('kube2', host('stopped', 'serving'))).toBe(
      'kube2 runs and serves the node, and kube1 does not',
    );
    expect(refuseDestroy('kube2', host('absent', 'serving'))).not.toBeNull();
  });

  it('a machine that does not serve, or one of two that serve, may go', () => {
    expect(refuseDestroy('kube2', host('serving', 'running'))).toBeNull();
    expect(refuseDestroy('kube2', host('serving', 'stopped'))).toBeNull();
    expect(refuseDestroy('kube2', host('serving', 'serving'))).toBeNull();
    expect(refuseDestroy('kube1', host('stopped', 'absent'))).toBeNull();
  });

  it('a target this operation never started is not stopped when it runs at all', () => {
    expect(refuseDestroy('kube2', host('serving', 'running'), { neverStarted: true })).toBe(
      'kube2 runs, and this operation never started it',
    );
    expect(refuseDestroy('kube2', host('serving', 'stopped'), { neverStarted: true })).toBeNull();
  });

  it('a machine the host cannot be asked about is never destroyed', () => {
    expect(refuseDestroy('kube1', host('unknown', 'serving'))).toBe(
      'the host cannot say whether kube1 runs (EMFILE)',
    );
  });
});

describe('observeHost and describeNode', () => {
  const inspection = (name: MachineName, running: boolean): MachineInspection => ({
    name,
    registered: running,
    running,
    kubelet: running ? 'active' : 'inactive',
    healthy: running,
  });

  it('asks each machine, looks at the disk for those machined does not know, and says what serves', async () => {
    const facts = await observeHost(
      { inspect: async (m) => inspection(m, m === 'kube1') },
      { onDisk: async (m) => m === 'kube1' },
    );
    expect(facts.kube1).toMatchObject({ known: true, running: true, serving: true, exists: true });
    expect(facts.kube2).toMatchObject({ known: true, running: false, exists: false });
    expect(servingMachine(facts)).toBe('kube1');
    expect(describeNode(facts)).toBe('the node: kube1 serves (kube2 absent)');
  });

  it('an inspection that fails makes the machine unknown, never absent', async () => {
    const facts = await observeHost({
      inspect: async (m) => {
        if (m === 'kube2') throw new Error('EMFILE: too many open files');
        return inspection(m, false);
      },
    });
    expect(facts.kube2).toMatchObject({ known: false, error: 'EMFILE: too many open files' });
    expect(describeNode(facts)).toBe(
      'the node: no machine serves (kube1 stopped, kube2 unknown (EMFILE: too many open files))',
    );
  });
});
