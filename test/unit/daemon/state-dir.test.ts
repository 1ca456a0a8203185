/** The state dir at start: created and marked as agentd's, and taken back by a start that fails. */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { markOrWarn, prepareStateDir, removeCreatedStateDir } from '../../../src/daemon/state-dir.js';
import { hasStateDirMarker, STATE_DIR_MARKER } from '../../../src/host/state-dir-marker.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-state-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function logger(): { warn: (obj: object, msg: string) => void; lines: string[] } {
  const lines: string[] = [];
  return { lines, warn: (_obj, msg) => lines.push(msg) };
}

describe('prepareStateDir', () => {
  it('says which directories it created, deepest first, and none when the dir exists', async () => {
    const state = path.join(dir, 'a', 'b', 'state');
    const first = await prepareStateDir(state);
    expect(first.created).toEqual([state, path.join(dir, 'a', 'b'), path.join(dir, 'a')]);
    expect((await prepareStateDir(state)).created).toEqual([]);
  });
});

describe('the marker', () => {
  it("goes into a dir agentd created, an empty one, and one with agentd's layout (a node from before the marker)", async () => {
    const created = path.join(dir, 'created');
    await mkdir(created);
    await markOrWarn(created, true, logger());
    expect(await hasStateDirMarker(created)).toBe(true);
    expect(await readFile(path.join(created, STATE_DIR_MARKER), 'utf8')).toMatch(/^agentd state directory\n/);

    const empty = path.join(dir, 'empty'); // systemd's StateDirectory= makes it before agentd starts
    await mkdir(empty);
    await markOrWarn(empty, false, logger());
    expect(await hasStateDirMarker(empty)).toBe(true);

    const old = path.join(dir, 'old');
    await mkdir(path.join(old, 'operations'), { recursive: true });
    await mkdir(path.join(old, 'cache'));
    await writeFile(path.join(old, 'node.json'), '{}');
    await writeFile(path.join(old, 'journal.json.1234'), '{}'); // a temp file of an atomic write
    await markOrWarn(old, false, logger());
    expect(await hasStateDirMarker(old)).toBe(true);

    // install.sh records the install in the state dir before agentd first starts.
    const installed = path.join(dir, 'installed');
    await mkdir(installed);
    await writeFile(path.join(installed, 'install-sh.state'), 'first\n');
    await markOrWarn(installed, false, logger());
    expect(await hasStateDirMarker(installed)).toBe(true);
  });

  it('is not written into a dir that holds other things, and the log says uninstall will not remove it', async () => {
    const home = path.join(dir, 'home');
    await mkdir(home);
    await writeFile(path.join(home, 'thesis.tex'), 'years of work');
    await writeFile(path.join(home, 'node.json'), '{}');
    const log = logger();
    await markOrWarn(home, false, log);
    expect(await hasStateDirMarker(home)).toBe(false);
    expect(log.lines).toEqual([
      `the state directory ${home} holds files that are not agentd's: it is not marked as agentd's, and agentctl uninstall will not remove it`,
    ]);
  });
});

describe('removeCreatedStateDir', () => {
  it('takes back what a failed start created, but nothing that holds more than the marker', async () => {
    const state = path.join(dir, 'a', 'state');
    const { created } = await prepareStateDir(state);
    await markOrWarn(state, true, logger());
    await removeCreatedStateDir(created);
    expect(existsSync(path.join(dir, 'a'))).toBe(false);

    const kept = path.join(dir, 'b', 'state');
    const again = await prepareStateDir(kept);
    await markOrWarn(kept, true, logger());
    await writeFile(path.join(kept, 'journal.json'), '{}');
    await removeCreatedStateDir(again.created);
    expect(await hasStateDirMarker(kept)).toBe(true);
    expect(existsSync(path.join(kept, 'journal.json'))).toBe(true);
  });
});
