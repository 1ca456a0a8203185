/**
 * A large image layer for the extraction benchmark: a tree of many small files and a few big
 * ones (~200 MB uncompressed), packed with GNU tar and gzip -1.
 */
import { mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';

const WORDS = 'node kubelet containerd runc cni bridge machine rootfs layer image update verify commit'.split(
  ' ',
);

/** Deterministic pseudo-random generator (xorshift32). */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
}

/** Text-like content (compresses a few times, like config files and scripts). */
function textBytes(rand: () => number, size: number): Buffer {
  const parts: string[] = [];
  let n = 0;
  while (n < size) {
    const w = `${WORDS[rand() % WORDS.length]}${rand() % 1000} `;
    parts.push(w);
    n += w.length;
  }
  return Buffer.from(parts.join('').slice(0, size));
}

/** Binary-like content (barely compresses, like executables' code sections). */
function binaryBytes(rand: () => number, size: number): Buffer {
  const words = new Uint32Array(Math.ceil(size / 4));
  for (let i = 0; i < words.length; i++) words[i] = rand() & (i % 4 === 0 ? 0xffffffff : 0x0f0f0f0f);
  return Buffer.from(words.buffer, 0, size);
}

export interface LayerFixture {
  file: string;
  uncompressedBytes: number;
  compressedBytes: number;
  files: number;
}

/** Build the tree under `workDir/tree` and pack it to `workDir/layer.tar.gz`. */
export async function createLayerFixture(workDir: string): Promise<LayerFixture> {
  const tree = path.join(workDir, 'tree');
  const rand = prng(42);
  let total = 0;
  let files = 0;
  for (let d = 0; d < 60; d++) {
    const dir = path.join(tree, 'usr', 'share', `pkg-${d}`, d % 3 === 0 ? 'doc' : 'lib');
    await mkdir(dir, { recursive: true });
    for (let f = 0; f < 80; f++) {
      const size = 512 + (rand() % (32 * 1024));
      const data = f % 2 === 0 ? textBytes(rand, size) : binaryBytes(rand, size);
      await writeFile(path.join(dir, `file-${f}${f % 2 === 0 ? '.txt' : '.so'}`), data);
      total += size;
      files++;
    }
  }
  await mkdir(path.join(tree, 'usr', 'bin'), { recursive: true });
  for (let b = 0; b < 4; b++) {
    const size = 30 * 1024 * 1024;
    await writeFile(path.join(tree, 'usr', 'bin', `big-${b}`), binaryBytes(rand, size));
    total += size;
    files++;
  }
  const file = path.join(workDir, 'layer.tar.gz');
  await execa('tar', ['-C', tree, '-I', 'gzip -1', '-cf', file, '.']);
  return { file, uncompressedBytes: total, compressedBytes: (await stat(file)).size, files };
}
