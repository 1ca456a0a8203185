/**
 * `node:ffi` (Node 26.1 and later, experimental) and the libc functions agentd binds through it:
 * `malloc_trim`, `mallopt` and `madvise` (heap-trim.ts), `socket`, `sendto` and `close`
 * (sd-notify.ts). The release embeds a fixed Node 26, so the API used is that build's. Where the
 * module is missing (Node 20), disabled (`--no-experimental-ffi`) or libc lacks a function, a
 * binding is null and its caller does without.
 */

/** The part of `node:ffi` used here (its types are not in @types/node 20). */
interface Ffi {
  dlopen(
    path: string | null,
    definitions: Record<string, { arguments: string[]; return: string }>,
  ): { functions: Record<string, (...args: unknown[]) => unknown> };
}

/**
 * `node:ffi`, without the experimental-feature warning Node prints on its first load: agentd
 * uses a few calls of it on purpose, and an operator reading the journal need not wonder.
 * Other warnings pass through.
 */
function loadFfiQuietly(): Ffi | undefined {
  const emitWarning = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const text = typeof warning === 'string' ? warning : warning.message;
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    if (type === 'ExperimentalWarning' && /\bFFI\b/.test(text)) return;
    (emitWarning as (...args: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return process.getBuiltinModule('node:ffi') as Ffi | undefined;
  } catch {
    return undefined;
  } finally {
    process.emitWarning = emitWarning;
  }
}

let ffi: Ffi | null | undefined;

/**
 * Bind the C function `name` of the process's own libraries (libc) through `node:ffi`; null
 * where it cannot be (see above). `definition` names its argument and return types as
 * `node:ffi` does (`int32`, `uint64`, `buffer`, …).
 */
export function bindLibc(
  name: string,
  definition: { arguments: string[]; return: string },
): ((...args: unknown[]) => unknown) | null {
  if (ffi === undefined) ffi = loadFfiQuietly() ?? null;
  if (ffi === null) return null;
  try {
    const fn = ffi.dlopen(null, { [name]: definition }).functions[name];
    return typeof fn === 'function' ? fn : null;
  } catch {
    return null; // not in this libc (musl has no malloc_trim)
  }
}
