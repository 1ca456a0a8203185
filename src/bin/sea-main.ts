/**
 * The main script of the release executable (a Node single executable application): it picks
 * the program by the name it was started as (`agentctl` is a symlink to `agentd`) and runs that
 * program's bundle, embedded in the executable (src/embedded.ts): dist/agentd.cjs or
 * dist/agentctl.cjs, the same files the npm bins run. Only the chosen bundle is read and
 * compiled, so agentctl never parses the daemon, and through its V8 code cache (the embedded file
 * `<bundle>.<key>.cache`, src/bin/load-bundle.ts).
 */
import path from 'node:path';
import { isSea } from 'node:sea';
import { EmbeddedFilesError, runningExecutableFiles, type EmbeddedFiles } from '../embedded.js';
import { bundleRequire, codeCacheName, loadBundleSource, type ProgramBundle } from './load-bundle.js';

export type ProgramName = 'agentd' | 'agentctl';

/** The program a command name stands for: `agentctl` (any path, any suffix), else `agentd`. */
export function programFromName(argv0: string): ProgramName {
  return path.basename(argv0).startsWith('agentctl') ? 'agentctl' : 'agentd';
}

// `process.argv0` is the name it was started as; `process.execPath` is the resolved file. The
// bundle's `require` is this script's, which in a single executable application loads only
// built-in modules, and the other embedded bundles (a program's library bundle): the bundles need
// nothing else. Its code cache was made by the release script with this runtime and flags
// (scripts/release/release.ts).
/** An embedded bundle, through its code cache when there is one; the bundles it requires too. */
function loadEmbedded(files: EmbeddedFiles, bundle: string): ProgramBundle {
  const source = files.read(bundle);
  if (!source) throw new EmbeddedFilesError(`it carries no ${bundle}`);
  const req = bundleRequire(require, (name) => loadEmbedded(files, name));
  return loadBundleSource(bundle, source.toString('utf8'), files.read(codeCacheName(bundle)), {
    req,
    filename: process.execPath,
  });
}

function main(): void {
  let program;
  try {
    const files = runningExecutableFiles();
    if (!files) throw new EmbeddedFilesError('it carries none of its programs');
    program = loadEmbedded(files, `${programFromName(process.argv0)}.cjs`);
  } catch (err) {
    if (!(err instanceof EmbeddedFilesError)) throw err;
    process.stderr.write(
      `${path.basename(process.argv0)}: ${process.execPath} cannot run: ${err.message}; install it again from the release artifact\n`,
    );
    process.exit(1);
  }
  program.run();
}

if (isSea()) main();
