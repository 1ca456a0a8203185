/**
 * kube-controller-manager running only the disruption controller, so that PodDisruptionBudgets
 * get real status (`disruptionsAllowed`, `observedGeneration`) and the Eviction API answers as
 * in a cluster. No leader election, no serving port; it talks to kube-apiserver as the admin.
 */
import path from 'node:path';
import { startProcess, type ManagedProcess, type Reaper } from './processes.js';

export function startKubeControllerManager(bin: string, kubeconfig: string, reaper: Reaper): ManagedProcess {
  return startProcess(reaper, 'kube-controller-manager', path.join(bin, 'kube-controller-manager'), [
    `--kubeconfig=${kubeconfig}`,
    '--controllers=disruption-controller',
    '--leader-elect=false',
    '--secure-port=0',
    '--v=1',
  ]);
}
