/**
 * The main script of the release executable (a Node single executable application): it picks
 * the program by the name it was started as (`agentctl` is a symlink to `agentd`) and runs that
 * program's bundle, embedded as an asset: dist/agentd.cjs or dist/agentctl.cjs, the same files
 * the npm bins run. Only the chosen bundle is compiled, so agentctl never parses the daemon, and
 * through its V8 code cache (the asset `<bundle>.cache`, src/bin/load-bundle.ts).
 */
import path from 'node:path';
import { getAsset, isSea } from 'node:sea';
import { bundleRequire, codeCacheName, loadBundleSource, type ProgramBundle } from './load-bundle.js';

export type ProgramName = 'agentd' | 'agentctl';

/** The program a command name stands for: `agentctl` (any path, any suffix), else `agentd`. */
export function programFromName(argv0: string): ProgramName {
  return path.basename(argv0).startsWith('agentctl') ? 'agentctl' : 'agentd';
}

/** An embedded asset, or undefined when the executable carries none of that name. */
function optionalAsset(name: string): Buffer | undefined {
  try {
    return Buffer.from(getAsset(name));
  } catch {
    return undefined;
  }
}

// `process.argv0` is the name it was started as; `process.execPath` is the resolved file. The
// bundle's `require` is this script's, which in a single executable application loads only
// built-in modules, and the other embedded bundles (a program's library bundle, an asset too):
// the bundles need nothing else. Its code cache was made by the release
// script with this runtime and flags (scripts/release/release.ts).
/** An embedded bundle, through its code cache when there is one; the bundles it requires too. */
function loadAsset(bundle: string): ProgramBundle {
  const req = bundleRequire(require, loadAsset);
  return loadBundleSource(bundle, getAsset(bundle, 'utf8'), optionalAsset(codeCacheName(bundle)), {
    req,
    filename: process.execPath,
  });
}

if (isSea()) loadAsset(`${programFromName(process.argv0)}.cjs`).run();
