/**
 * Hostile image layers: each one tries to write, link or delete outside the extraction target.
 * They are built for a sandbox laid out as `<sandbox>/rootfs` (the target) next to
 * `<sandbox>/outside` (holding `secret`), so even a broken extractor only touches the sandbox:
 * relative escapes climb from the target into `outside`, absolute ones name `outside` by its
 * absolute path.
 */
import type { TarBuildEntry } from '../../src/sim/mirror/tar-build.js';

export interface MaliciousLayer {
  name: string;
  /** What the layer tries. */
  attack: string;
  entries: TarBuildEntry[];
}

/** Content of `<sandbox>/outside/secret`, which no layer may change or remove. */
export const OUTSIDE_SECRET = 'do not touch\n';

/** The layers, given the absolute path of the `outside` directory. */
export function maliciousLayers(outsideDir: string): MaliciousLayer[] {
  const longComponent = 'c'.repeat(256);
  const longPath = `${'d/'.repeat(2048)}f`; // 4097 bytes
  return [
    {
      name: 'dotdot-traversal',
      attack: 'a file named ../outside/pwned',
      entries: [{ path: '../outside/pwned', content: 'pwned' }],
    },
    {
      name: 'dotdot-inside-path',
      attack: 'a file named etc/../../outside/pwned',
      entries: [
        { path: 'etc/', type: 'directory' },
        { path: 'etc/../../outside/pwned', content: 'pwned' },
      ],
    },
    {
      name: 'absolute-path',
      attack: 'a file with an absolute name',
      entries: [{ path: `${outsideDir}/pwned`, content: 'pwned' }],
    },
    {
      name: 'symlink-escape-write',
      attack: 'a symlink to ../outside, then a file written through it',
      entries: [
        { path: 'escape', type: 'symlink', linkTarget: '../outside' },
        { path: 'escape/pwned', content: 'pwned' },
      ],
    },
    {
      name: 'symlink-escape-absolute-write',
      attack: 'a symlink to the absolute outside path, then a file written through it',
      entries: [
        { path: 'escape', type: 'symlink', linkTarget: outsideDir },
        { path: 'escape/pwned', content: 'pwned' },
      ],
    },
    {
      name: 'symlink-escape-overwrite',
      attack: 'a symlink to ../outside, then the outside secret overwritten through it',
      entries: [
        { path: 'escape', type: 'symlink', linkTarget: '../outside' },
        { path: 'escape/secret', content: 'pwned' },
      ],
    },
    {
      name: 'symlink-escape-directory',
      attack: 'a symlink to ../outside, then a directory created through it',
      entries: [
        { path: 'escape', type: 'symlink', linkTarget: '../outside' },
        { path: 'escape/newdir/', type: 'directory' },
      ],
    },
    {
      name: 'hardlink-outside',
      attack: 'a hardlink to ../outside/secret',
      entries: [{ path: 'link', type: 'hardlink', linkTarget: '../outside/secret' }],
    },
    {
      name: 'hardlink-absolute',
      attack: 'a hardlink to the absolute path of the outside secret',
      entries: [{ path: 'link', type: 'hardlink', linkTarget: `${outsideDir}/secret` }],
    },
    {
      name: 'hardlink-through-symlink',
      attack: 'a symlink to ../outside, then a hardlink to escape/secret',
      entries: [
        { path: 'escape', type: 'symlink', linkTarget: '../outside' },
        { path: 'link', type: 'hardlink', linkTarget: 'escape/secret' },
      ],
    },
    {
      name: 'hardlink-missing-target',
      attack: 'a hardlink to a path that does not exist in the tree',
      entries: [{ path: 'link', type: 'hardlink', linkTarget: 'no/such/file' }],
    },
    {
      name: 'char-device',
      attack: 'a character device node (/dev/null)',
      entries: [
        { path: 'dev/', type: 'directory' },
        { path: 'dev/null', type: 'char-device', devMajor: 1, devMinor: 3 },
      ],
    },
    {
      name: 'block-device',
      attack: 'a block device node',
      entries: [{ path: 'sda', type: 'block-device', devMajor: 8, devMinor: 0 }],
    },
    {
      name: 'fifo',
      attack: 'a named pipe',
      entries: [{ path: 'pipe', type: 'fifo' }],
    },
    {
      name: 'whiteout-escape',
      attack: 'a whiteout ../.wh.outside deleting the outside directory',
      entries: [{ path: '../.wh.outside' }],
    },
    {
      name: 'whiteout-through-symlink',
      attack: 'a symlink to ../outside, then escape/.wh.secret',
      entries: [{ path: 'escape', type: 'symlink', linkTarget: '../outside' }, { path: 'escape/.wh.secret' }],
    },
    {
      name: 'opaque-through-symlink',
      attack: 'a symlink to ../outside, then an opaque marker emptying it',
      entries: [
        { path: 'escape', type: 'symlink', linkTarget: '../outside' },
        { path: 'escape/.wh..wh..opq' },
      ],
    },
    {
      name: 'duplicate-dir-becomes-symlink',
      attack:
        'a directory, then a duplicate entry turning it into a symlink to ../outside, then a file under it',
      entries: [
        { path: 'data/', type: 'directory' },
        { path: 'data/ok', content: 'fine' },
        { path: 'data', type: 'symlink', linkTarget: '../outside' },
        { path: 'data/pwned', content: 'pwned' },
      ],
    },
    {
      name: 'path-too-long',
      attack: 'a path of 4097 bytes',
      entries: [{ path: longPath, content: 'x' }],
    },
    {
      name: 'component-too-long',
      attack: 'a path component of 256 bytes',
      entries: [{ path: `dir/${longComponent}`, content: 'x' }],
    },
  ];
}
