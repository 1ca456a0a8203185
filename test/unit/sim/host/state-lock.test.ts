/**
 * The sim state lock with real processes: mutual exclusion across them, a holder killed with
 * SIGKILL freeing the lock at once, waiters running only after the holder lets go, the wait
 * timing out with TIMEOUT, and nothing left on disk.
 */
import { execa, type ResultPromise } from 'execa';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentError } from '../../../../src/errors.js';
import { simLockName, withSimStateLock } from '../../../../src/sim/host/state-lock.js';
import { incrementSlowly } from '../../../support/slow-counter.js';
import { makeTempRoot, type TempRoot } from './sim-fixtures.js';

const CHILD = fileURLToPath(new URL('../../../support/sim-lock-child.ts', import.meta.url));

let tmp: TempRoot;
let stateFile: string;
const children: ResultPromise[] = [];

function child(...args: string[]): ResultPromise {
  const proc = execa(process.execPath, ['--import', 'tsx', CHILD, ...args], { reject: false });
  children.push(proc);
  return proc;
}

// Resolve once the child says it holds the lock.
function held(proc: ResultPromise): Promise<void> {
  return new Promise((resolve, reject) => {
    proc.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('held')) resolve();
    });
    void proc.then((r) => reject(new Error(`child ended before holding the lock: ${r.stderr}`)));
  });
}

beforeEach(async () => {
  tmp = await makeTempRoot('agentd-sim-lock-');
  stateFile = path.join(tmp.root, 'state.json');
});

afterEach(async () => {
  for (const proc of children.splice(0)) {
    proc.kill('SIGKILL');
    await proc;
  }
  await tmp.cleanup();
});

describe('withSimStateLock', () => {
  it('serializes read-modify-writes across processes: no increment is lost', async () => {
    const counter = path.join(tmp.root, 'counter');
    await Promise.all(Array.from({ length: 6 }, () => child('count', stateFile, counter, '15')));
    expect(Number(await readFile(counter, 'utf8'))).toBe(6 * 15);
  });

  it('serializes holders within one process too', async () => {
    const counter = path.join(tmp.root, 'counter');
    await Promise.all(
      Array.from({ length: 20 }, () => withSimStateLock(stateFile, () => incrementSlowly(counter))),
    );
    expect(Number(await readFile(counter, 'utf8'))).toBe(20);
  });

  it('a waiter runs only once the holder has let go', async () => {
    const marker = path.join(tmp.root, 'released');
    const holder = child('hold-for', stateFile, '300', marker);
    await held(holder);
    const seen = await withSimStateLock(stateFile, () => readFile(marker, 'utf8'));
    expect(seen).toBe('released');
  });

  it('a holder killed with SIGKILL frees the lock: the next one gets it without waiting it out', async () => {
    const holder = child('hold', stateFile);
    await held(holder);
    holder.kill('SIGKILL');
    await holder;
    // A wait shorter than any stale-lock timeout: the kernel freed the name when the holder died.
    await expect(withSimStateLock(stateFile, () => Promise.resolve('mine'), { waitMs: 2_000 })).resolves.toBe(
      'mine',
    );
  });

  it('gives up with TIMEOUT, naming the state file, while another process holds it', async () => {
    const holder = child('hold', stateFile);
    await held(holder);
    const err = await withSimStateLock(stateFile, () => Promise.resolve(), { waitMs: 200 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AgentError);
    expect((err as AgentError).code).toBe('TIMEOUT');
    expect((err as AgentError).message).toContain(stateFile);
  });

  it('leaves nothing on disk, held or not', async () => {
    await withSimStateLock(stateFile, () => Promise.resolve());
    expect(await readdir(tmp.root)).toEqual([]);
    const holder = child('hold', stateFile);
    await held(holder);
    expect(await readdir(tmp.root)).toEqual([]);
    holder.kill('SIGKILL');
    await holder;
    expect(await readdir(tmp.root)).toEqual([]);
  });

  it('locks each state file on its own', async () => {
    const holder = child('hold', stateFile);
    await held(holder);
    const other = path.join(tmp.root, 'other', 'state.json');
    await expect(withSimStateLock(other, () => Promise.resolve('free'), { waitMs: 200 })).resolves.toBe(
      'free',
    );
    expect(simLockName(other)).not.toBe(simLockName(stateFile));
    expect(simLockName(stateFile)).toBe(simLockName(`${tmp.root}/./state.json`));
  });
});
