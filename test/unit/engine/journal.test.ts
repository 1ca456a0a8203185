/** The switch-over journal: atomic writes, strict reads, and the writer recovery relies on. */
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { journalPath, readJournal, writeJournal, type Journal } from '../../../src/engine/journal.js';
import { nodeStatePath, readNodeState, writeNodeState } from '../../../src/engine/node-state.js';
import { JournalWriter } from '../../../src/engine/switch-journal.js';
import { makeJournal } from './fakes.js';

let stateDir: string;
beforeEach(async () => {
  stateDir = path.join(await mkdtemp(path.join(os.tmpdir(), 'agentd-journal-')), 'state');
});
afterEach(async () => {
  await rm(path.dirname(stateDir), { recursive: true, force: true });
});

const sample: Journal = makeJournal();

describe('journal file', () => {
  it('absent → null', async () => {
    expect(await readJournal(stateDir)).toBeNull();
  });

  it('round-trips, mode 0600, in a 0700 state dir', async () => {
    await writeJournal(stateDir, sample);
    expect(await readJournal(stateDir)).toEqual(sample);
    expect((await stat(journalPath(stateDir))).mode & 0o777).toBe(0o600);
    expect((await stat(stateDir)).mode & 0o777).toBe(0o700);
  });

  it('a journal written before uncordonPending existed still reads (as not pending)', async () => {
    const old: Record<string, unknown> = { ...sample, closed: true, cordonedByUs: true };
    delete old.uncordonPending;
    await writeJournal(stateDir, sample); // creates the state dir
    await writeFile(journalPath(stateDir), JSON.stringify(old));
    const j = await readJournal(stateDir);
    expect(j).toMatchObject({ operationId: 'op-1', closed: true, cordonedByUs: true });
    expect(j?.uncordonPending).toBeUndefined();
    await writeJournal(stateDir, { ...sample, uncordonPending: true });
    expect(await readJournal(stateDir)).toMatchObject({ uncordonPending: true });
  });

  it('a journal that does not match the schema is refused, never half-trusted', async () => {
    await writeJournal(stateDir, sample);
    await writeFile(journalPath(stateDir), JSON.stringify({ ...sample, source: 'kube3' }));
    const err = await readJournal(stateDir).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'PRECONDITION_FAILED',
      data: { file: journalPath(stateDir), reason: 'CorruptStateFile' },
    });
    expect((err as Error).message).toContain('source');
  });

  for (const [what, bytes] of [
    ['truncated JSON', '{"operationId": "op-1", "sou'],
    ['an empty file', ''],
    ['not an object', '[1, 2]'],
  ] as const) {
    it(`a journal that is ${what} is an AgentError naming the file, not a SyntaxError`, async () => {
      await writeJournal(stateDir, sample);
      await writeFile(journalPath(stateDir), bytes);
      const err = await readJournal(stateDir).catch((e: unknown) => e);
      expect(err).not.toBeInstanceOf(SyntaxError);
      expect(err).toMatchObject({
        code: 'PRECONDITION_FAILED',
        data: { file: journalPath(stateDir), reason: 'CorruptStateFile' },
      });
      expect((err as Error).message).toContain(journalPath(stateDir));
    });
  }
});

describe('node state file', () => {
  it('absent → undefined; corrupt → an AgentError naming the file', async () => {
    expect(await readNodeState(stateDir)).toBeUndefined();
    await writeNodeState(stateDir, 'kube1', new Date(0));
    expect(await readNodeState(stateDir)).toMatchObject({ activeMachine: 'kube1' });
    await writeFile(nodeStatePath(stateDir), '{"activeMachine": "kube1",');
    const err = await readNodeState(stateDir).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(SyntaxError);
    expect(err).toMatchObject({
      code: 'PRECONDITION_FAILED',
      data: { file: nodeStatePath(stateDir), reason: 'CorruptStateFile' },
    });
    expect((err as Error).message).toContain(nodeStatePath(stateDir));
    await writeFile(nodeStatePath(stateDir), JSON.stringify({ activeMachine: 'kube9', updatedAt: 'x' }));
    await expect(readNodeState(stateDir)).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
  });
});

describe('JournalWriter', () => {
  it('every change is on disk before set() resolves; close records the outcome', async () => {
    let tick = 0;
    const w = new JournalWriter(
      stateDir,
      { operationId: 'op-2', kind: 'update', source: null, target: 'kube1', targetHash: null },
      () => `2026-01-01T00:00:0${tick++}.000Z`,
    );
    expect(await readJournal(stateDir)).toBeNull(); // nothing until the first set
    await w.set({});
    expect(await readJournal(stateDir)).toMatchObject({ phase: 'init', phaseState: 'done', closed: false });
    await w.set({ phase: 'provision', phaseState: 'running' });
    expect(await readJournal(stateDir)).toMatchObject({ phase: 'provision', phaseState: 'running' });
    await w.set({ committed: true, targetHash: 'abc' });
    expect(w.state).toMatchObject({ phase: 'provision', committed: true, targetHash: 'abc' });
    await w.close('succeeded');
    const j = await readJournal(stateDir);
    expect(j).toMatchObject({ operationId: 'op-2', committed: true, closed: true, outcome: 'succeeded' });
    expect(j?.updatedAt).toBe('2026-01-01T00:00:04.000Z');
    // Pretty-printed JSON with a trailing newline, readable by an operator.
    expect(await readFile(journalPath(stateDir), 'utf8')).toMatch(/^\{\n {2}"version": 1,[\s\S]*\}\n$/);
  });

  it('carries a pending uncordon of an earlier operation into the new journal', async () => {
    const w = new JournalWriter(
      stateDir,
      {
        operationId: 'op-3',
        kind: 'update',
        source: 'kube1',
        target: 'kube2',
        targetHash: null,
        uncordonPending: true,
      },
      () => '2026-01-01T00:00:00.000Z',
    );
    await w.set({ cordonedByUs: false });
    expect(await readJournal(stateDir)).toMatchObject({ operationId: 'op-3', uncordonPending: true });
    const plain = new JournalWriter(
      stateDir,
      { operationId: 'op-4', kind: 'reset', source: 'kube1', target: null, targetHash: null },
      () => '2026-01-01T00:00:00.000Z',
    );
    await plain.set({});
    expect((await readJournal(stateDir))?.uncordonPending).toBeUndefined();
  });
});
