/**
 * undici, loaded on first use. Only an update (artifact downloads, image pulls) and a fleet
 * health check make HTTP requests with it; a daemon that idles, serves `status` and watches its
 * Machine never needs it, and loading it at start costs resident memory for nothing
 * (docs/benchmarks.md, "Footprint"). Modules that use undici import its types statically and
 * its values through here.
 */
import type * as UndiciModule from 'undici';

export type Undici = typeof UndiciModule;

let loading: Promise<Undici> | undefined;

export function loadUndici(): Promise<Undici> {
  loading ??= import('undici');
  return loading;
}
