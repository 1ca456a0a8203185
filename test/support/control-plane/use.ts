/**
 * One control plane per test file: `const cp = useControlPlane()` in a file's top level (or a
 * describe) starts it in beforeAll and stops it in afterAll, pass or fail; `cp()` returns it.
 */
import { afterAll, beforeAll } from 'vitest';
import { startControlPlane, type ControlPlane, type ControlPlaneOptions } from './index.js';

/** Starting takes a few seconds; on a loaded machine (the whole suite beside it) much longer. */
const START_TIMEOUT_MS = 120_000;

export function useControlPlane(o: ControlPlaneOptions = {}): () => ControlPlane {
  let cp: ControlPlane | null = null;
  beforeAll(async () => {
    cp = await startControlPlane(o);
  }, START_TIMEOUT_MS);
  afterAll(async () => {
    await cp?.stop();
    cp = null;
  }, 60_000);
  return () => {
    if (!cp) throw new Error('the control plane is not running (beforeAll failed?)');
    return cp;
  };
}
