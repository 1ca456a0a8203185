import { execa } from 'execa';
import { promises as fsp } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { writeFileAtomic } from '../../../src/host/fs-atomic.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-atomic-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('writeFileAtomic', () => {
  it('writes a new file with its mode, creating missing directories', async () => {
    const file = path.join(dir, 'a', 'b', 'state.json');
    await writeFileAtomic(file, '{}\n', { mode: 0o600 });
    expect(await readFile(file, 'utf8')).toBe('{}\n');
    expect((await lstat(file)).mode & 0o777).toBe(0o600);
  });

  it('replaces an existing regular file whole', async () => {
    const file = path.join(dir, 'journal.json');
    await writeFile(file, 'old and longer\n');
    await writeFileAtomic(file, 'new\n');
    expect(await readFile(file, 'utf8')).toBe('new\n');
  });

  // A link planted where a root daemon writes (PID file, state) must not let it replace the
  // link's target: write-file-atomic alone resolves the link and renames over the target.
  it('refuses a symbolic link in the place of the file and leaves link and target as they were', async () => {
    const target = path.join(dir, 'precious');
    await writeFile(target, 'keep me\n');
    const file = path.join(dir, 'agentd.pid');
    await symlink(target, file);
    await expect(writeFileAtomic(file, '123\n')).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
      message: expect.stringContaining(`write ${file}: it is a symbolic link;`) as unknown as string,
    });
    expect(await readFile(target, 'utf8')).toBe('keep me\n');
    expect(await readlink(file)).toBe(target);
  });

  // The check and the write are two steps: a link planted between them must be replaced, not
  // written through (write-file-atomic resolved the path after the check and wrote the target).
  it('replaces a link planted between the check and the write, leaving its target as it was', async () => {
    const target = path.join(dir, 'precious');
    await writeFile(target, 'keep me\n');
    const file = path.join(dir, 'agentd.pid');
    const realLstat = fsp.lstat.bind(fsp);
    const spy = vi.spyOn(fsp, 'lstat').mockImplementation((async (p: string, ...rest: []) => {
      try {
        return await realLstat(p, ...rest);
      } finally {
        if (p === file) await symlink(target, file);
      }
    }) as typeof fsp.lstat);
    try {
      await writeFileAtomic(file, '123\n', { mode: 0o600 });
      // The link was there before the write (the check saw nothing).
      expect(spy).toHaveBeenCalledWith(file);
    } finally {
      spy.mockRestore();
    }
    expect(await readFile(target, 'utf8')).toBe('keep me\n');
    const st = await lstat(file);
    expect(st.isFile()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect(await readFile(file, 'utf8')).toBe('123\n');
    // No temp file is left behind.
    expect((await readdir(dir)).sort()).toEqual(['agentd.pid', 'precious']);
  });

  it('refuses a dangling symbolic link too (nothing is created at its target)', async () => {
    const target = path.join(dir, 'nowhere');
    const file = path.join(dir, 'state.json');
    await symlink(target, file);
    await expect(writeFileAtomic(file, '{}\n')).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
    await expect(lstat(target)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  // `--pid-file /dev/null` once turned the host's /dev/null into a regular file holding a PID:
  // the rename replaces whatever is at the path. A named pipe stands in for the device here.
  it.each([
    ['a named pipe', async (p: string) => void (await execa('mkfifo', [p]))],
    ['a directory', async (p: string) => void (await mkdir(p))],
  ])('refuses %s in the place of the file and leaves it as it was', async (what, make) => {
    const file = path.join(dir, 'agentd.pid');
    await make(file);
    await expect(writeFileAtomic(file, '123\n')).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
      message: expect.stringContaining(`write ${file}: it is ${what};`) as unknown as string,
    });
    const st = await lstat(file);
    expect(what === 'a directory' ? st.isDirectory() : st.isFIFO()).toBe(true);
  });
});
