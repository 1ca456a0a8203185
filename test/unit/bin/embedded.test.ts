import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EmbeddedFilesError, encodeEmbedded, openEmbedded } from '../../../src/embedded.js';
import { makeTempDir } from '../../support/daemon.js';

describe('files embedded after an executable', () => {
  /** A file of `prefix` (the executable's own bytes) followed by `payload`. */
  async function fileOf(prefix: Buffer, payload: Buffer): Promise<string> {
    const file = path.join(await makeTempDir('agentd-embedded-'), 'exe');
    await writeFile(file, Buffer.concat([prefix, payload]));
    return file;
  }

  const files = new Map([
    ['agentd.cjs', Buffer.from('module.exports = { run() {} };\n')],
    ['empty', Buffer.alloc(0)],
    ['binary', Buffer.from([0, 255, 1, 254, 10, 13])],
  ]);

  it('reads back every file, whatever the executable before them', async () => {
    const file = await fileOf(Buffer.from('\x7fELF and the rest of an executable'), encodeEmbedded(files));
    const embedded = openEmbedded(file)!;
    for (const [name, bytes] of files) expect(embedded.read(name)).toEqual(bytes);
    expect(embedded.read('agentctl.cjs')).toBeUndefined();
  });

  it('reads an index larger than the tail it reads first', async () => {
    const many = new Map(
      Array.from({ length: 200 }, (_, i) => [`file-${i}-${'x'.repeat(40)}`, Buffer.from(`#${i}`)]),
    );
    const payload = encodeEmbedded(many);
    expect(payload.readUInt32LE(payload.length - 8)).toBeGreaterThan(4096);
    const embedded = openEmbedded(await fileOf(Buffer.alloc(10_000, 1), payload))!;
    for (const [name, bytes] of many) expect(embedded.read(name)).toEqual(bytes);
  });

  it('keeps reading the file it opened after another one has replaced it at its path', async () => {
    const file = await fileOf(Buffer.from('old executable'), encodeEmbedded(files));
    const embedded = openEmbedded(file)!;
    // An upgrade: the new file is written beside and renamed over the old one.
    const next = `${file}.new`;
    await writeFile(next, encodeEmbedded(new Map([['agentd.cjs', Buffer.from('the new bundle')]])));
    await rename(next, file);
    expect(embedded.read('agentd.cjs')).toEqual(files.get('agentd.cjs'));
    expect(embedded.read('binary')).toEqual(files.get('binary'));
  });

  it('finds none in a file without them: a plain executable, an empty or a short file', async () => {
    expect(openEmbedded(process.execPath)).toBeUndefined();
    // The default is the running executable, here a plain node.
    expect(openEmbedded()).toBeUndefined();
    expect(openEmbedded(await fileOf(Buffer.alloc(0), Buffer.alloc(0)))).toBeUndefined();
    expect(openEmbedded(await fileOf(Buffer.from('short'), Buffer.alloc(0)))).toBeUndefined();
  });

  it('names a file it cannot open', async () => {
    const missing = path.join(await makeTempDir('agentd-embedded-'), 'no-such-exe');
    expect(() => openEmbedded(missing)).toThrow(EmbeddedFilesError);
    expect(() => openEmbedded(missing)).toThrow(`cannot open ${missing}: ENOENT`);
  });

  it('refuses a damaged payload with an error that says so', async () => {
    const payload = encodeEmbedded(files);
    // Lengths in the footer that reach before the start of the file.
    const cut = await fileOf(Buffer.alloc(0), payload.subarray(10));
    expect(() => openEmbedded(cut)).toThrow(EmbeddedFilesError);
    expect(() => openEmbedded(cut)).toThrow(/embedded files are damaged \(footer out of range\)/);
    // An index that is not JSON.
    const broken = Buffer.from(payload);
    const indexStart = broken.length - 16 - broken.readUInt32LE(broken.length - 8);
    broken.write('}', indexStart, 'latin1');
    const unreadable = await fileOf(Buffer.alloc(4), broken);
    expect(() => openEmbedded(unreadable)).toThrow(/index unreadable/);
    // An entry that reaches past the files.
    const lying = encodeEmbedded(new Map([['a', Buffer.from('abc')]]));
    const json = lying.toString('latin1').replace('"length":3', '"length":9');
    const badEntry = await fileOf(Buffer.alloc(4), Buffer.from(json, 'latin1'));
    expect(() => openEmbedded(badEntry)).toThrow(/bad index entry/);
  });
});
