import { readFileSync } from 'node:fs';

/** Set by the bundler (scripts/build.ts) from package.json; absent when the sources run directly. */
declare const __AGENTD_VERSION__: string | undefined;

/**
 * agentd's version: compiled into the bundle (the release executable has no package.json
 * beside it), else read once from package.json (one level above src/ and dist/).
 */
export const VERSION: string =
  typeof __AGENTD_VERSION__ === 'string'
    ? __AGENTD_VERSION__
    : (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string })
        .version;
