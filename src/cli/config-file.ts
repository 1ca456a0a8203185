/** Read an agent config file given to `--config`: JSON, or YAML (loaded only when needed). */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { CliError, EXIT } from './exit-codes.js';

/** The file's content as an object; a missing, unreadable or malformed file is a usage error. */
export async function readConfigFile(
  file: string,
  cwd: string,
  flag = '--config',
): Promise<Record<string, unknown>> {
  const full = path.resolve(cwd, file);
  let text: string;
  try {
    text = await readFile(full, 'utf8');
  } catch (err) {
    throw new CliError(EXIT.USAGE, `${flag}: cannot read ${full}: ${(err as Error).message}`, {
      code: 'INVALID_CONFIG',
      file: full,
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Not JSON: YAML (a superset of it). Loaded only here so other commands do not pay for it.
    const { parse } = await import('yaml');
    try {
      value = parse(text);
    } catch (err) {
      throw new CliError(
        EXIT.USAGE,
        `${flag}: ${full} is neither JSON nor YAML: ${(err as Error).message.split('\n')[0]}`,
        { code: 'INVALID_CONFIG', file: full },
      );
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const got = Array.isArray(value) ? 'a list' : value === null ? 'an empty document' : typeof value;
    throw new CliError(
      EXIT.USAGE,
      `${flag}: ${full} must hold an agent config object (PascalCase keys), got ${got}`,
      {
        code: 'INVALID_CONFIG',
        file: full,
      },
    );
  }
  return value as Record<string, unknown>;
}
