import { readFileSync } from 'node:fs';

/** agentd's version, read once from package.json (one level above src/ and dist/). */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
