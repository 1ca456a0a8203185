/**
 * The agent config `--sim` joins a node with when `update` gets none (docs/architecture.md): MachineName
 * `sim-node`, Kubernetes 1.34.0, downloads and image from the local mirror.
 */
import { agentConfigSchema, type AgentConfig } from '../config/agent-config.js';
import { mirrorDownloads } from './mirror/index.js';

/** A syntactically valid, self-describing placeholder CA for the simulated cluster. */
const SIM_CA_PEM = [
  '-----BEGIN CERTIFICATE-----',
  'QWdlbnRkIHNpbXVsYXRlZCBjbHVzdGVyIENBIC0tIG5vdCBhIHJlYWwgY2VydGlm',
  'aWNhdGU7IHVzZWQgb25seSBieSBhZ2VudGQgLS1zaW0=',
  '-----END CERTIFICATE-----',
  '',
].join('\n');

export const SIM_IMAGE_REPOSITORY = 'agentd/sim-rootfs';

export function simDefaultConfig(mirror: { url: string; hostPort: string }): AgentConfig {
  return agentConfigSchema.parse({
    MachineName: 'sim-node',
    Cluster: {
      CaCertBase64: Buffer.from(SIM_CA_PEM).toString('base64'),
      ClusterDNS: '10.96.0.10',
      Version: '1.34.0',
    },
    Kubelet: {
      ApiServer: 'https://127.0.0.1:6443',
      Auth: { BootstrapToken: 'simsim.0123456789abcdef' },
      Labels: { 'unbounded-cloud.io/sim': 'true' },
      RegisterWithTaints: [],
    },
    OCIImage: `${mirror.hostPort}/${SIM_IMAGE_REPOSITORY}:v1`,
    Downloads: mirrorDownloads(mirror.url),
  });
}
