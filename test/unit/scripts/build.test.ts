import type { Metafile } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { externalDynamicImports } from '../../../scripts/build.js';

const output = (imports: Metafile['outputs'][string]['imports']): Metafile['outputs'][string] => ({
  bytes: 1,
  inputs: {},
  imports,
  exports: [],
});

describe('externalDynamicImports', () => {
  it('names an import() of a module left outside the bundle, which the loader cannot run', () => {
    const meta = {
      outputs: {
        'dist/agentd.cjs': output([
          { path: 'node:fs', kind: 'require-call', external: true },
          { path: 'node:timers/promises', kind: 'dynamic-import', external: true },
        ]),
        'dist/agentctl.cjs': output([{ path: './agentctl-libs.cjs', kind: 'require-call', external: true }]),
      },
    };
    expect(externalDynamicImports(meta)).toEqual(["dist/agentd.cjs: import('node:timers/promises')"]);
  });

  it('allows an import() of a module inside the bundle (esbuild turns it into a call)', () => {
    const meta = {
      outputs: { 'dist/agentd.cjs': output([{ path: 'src/daemon/daemon.ts', kind: 'dynamic-import' }]) },
    };
    expect(externalDynamicImports(meta)).toEqual([]);
  });
});
