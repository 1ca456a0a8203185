/**
 * kube-apiserver's audit log (a control plane started with `apiServer: { audit: true }`): every
 * request with who made it and the answer; Machine writes with their bodies.
 */
import { readFile } from 'node:fs/promises';
import type { KubeJson } from './api.js';
import type { ControlPlane } from './index.js';

/**
 * The completed requests of `username` (all users when omitted), oldest first. A watch completes
 * when it ends; `stage: 'ResponseStarted'` gives the watches when they began, open ones too.
 */
export async function auditEvents(
  cp: ControlPlane,
  username?: string,
  stage: 'ResponseComplete' | 'ResponseStarted' = 'ResponseComplete',
): Promise<KubeJson[]> {
  const file = cp.apiServer.auditLog;
  if (file === null) throw new Error('the control plane was started without audit: true');
  const text = await readFile(file, 'utf8');
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as KubeJson)
    .filter((e) => e.stage === stage && (username === undefined || e.user?.username === username));
}

/** The user a bootstrap token authenticates as. */
export const bootstrapUser = (cp: ControlPlane): string => `system:bootstrap:${cp.bootstrapToken.id}`;
