/**
 * Reading agentd's own JSON state files (the switch-over journal, the node state): absent is
 * `null`, and a file that is not valid JSON or not of the expected shape is an AgentError
 * naming the file — never a bare SyntaxError, so the operator learns which file to look at.
 */
import { readFile } from 'node:fs/promises';
import type * as z from 'zod';
import { describeError, errorCode, PreconditionFailedError, toAgentError } from '../errors.js';

/** The file's content checked against `schema`, or null when it does not exist. */
export async function readJsonStateFile<S extends z.ZodType>(
  file: string,
  schema: S,
  kind: string,
): Promise<z.infer<S> | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return null;
    throw toAgentError(err, `read ${kind} ${file}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw corrupt(file, kind, `not valid JSON (${describeError(err)})`, err);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    const where = first?.path.length ? first.path.join('.') : '(root)';
    throw corrupt(file, kind, `${where}: ${first?.message ?? 'invalid'}`);
  }
  return parsed.data as z.infer<S>;
}

function corrupt(file: string, kind: string, detail: string, cause?: unknown): PreconditionFailedError {
  return new PreconditionFailedError(
    `${kind} ${file} is corrupt: ${detail}; restore it or move it aside (docs/operations.md, "A corrupt state file")`,
    { cause, data: { file, reason: 'CorruptStateFile' } },
  );
}
