/**
 * The main script of the release executable (a Node single executable application): it picks
 * the program by the name it was started as (`agentctl` is a symlink to `agentd`) and runs that
 * program's bundle, embedded as an asset: dist/agentd.cjs or dist/agentctl.cjs, the same files
 * the npm bins run. Only the chosen bundle is compiled, so agentctl never parses the daemon.
 */
import path from 'node:path';
import { getAsset, isSea } from 'node:sea';
import { compileFunction } from 'node:vm';

export type ProgramName = 'agentd' | 'agentctl';

/** The program a command name stands for: `agentctl` (any path, any suffix), else `agentd`. */
export function programFromName(argv0: string): ProgramName {
  return path.basename(argv0).startsWith('agentctl') ? 'agentctl' : 'agentd';
}

/**
 * Evaluate a CommonJS bundle as a module. Its `require` is this script's, which in a single
 * executable application loads only built-in modules: the bundles need nothing else.
 */
function evaluateBundle(file: string, source: string): { run(): void } {
  const module = { exports: {} as { run(): void } };
  const fn = compileFunction(source, ['exports', 'require', 'module', '__filename', '__dirname'], {
    filename: file,
  });
  fn(module.exports, require, module, process.execPath, path.dirname(process.execPath));
  return module.exports;
}

// `process.argv0` is the name it was started as; `process.execPath` is the resolved file.
if (isSea()) {
  const program = programFromName(process.argv0);
  evaluateBundle(`${program}.cjs`, getAsset(`${program}.cjs`, 'utf8')).run();
}
