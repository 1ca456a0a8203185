/** A valid agent config for tests; override fields with `makeAgentConfig({ ... })`. */
import type { AgentConfigInput } from '../../src/config/agent-config.js';

export const TEST_CA_PEM = `-----BEGIN CERTIFICATE-----
MIIBdzCCAR2gAwIBAgIUTESTTESTTESTTESTTESTTESTTESTwCgYIKoZIzj0EAwIw
ETEPMA0GA1UEAwwGdGVzdGNhMB4XDTI2MDEwMTAwMDAwMFoXDTM2MDEwMTAwMDAw
MFowETEPMA0GA1UEAwwGdGVzdGNh
-----END CERTIFICATE-----
`;
export const TEST_BOOTSTRAP_TOKEN = 'abc123.0123456789abcdef';

export function makeAgentConfig(overrides: Partial<AgentConfigInput> = {}): AgentConfigInput {
  return {
    MachineName: 'worker-01',
    Cluster: {
      CaCertBase64: Buffer.from(TEST_CA_PEM).toString('base64'),
      ClusterDNS: '10.96.0.10',
      Version: '1.34.0',
    },
    Kubelet: {
      ApiServer: 'https://10.0.0.1:6443',
      Auth: { BootstrapToken: TEST_BOOTSTRAP_TOKEN },
      Labels: { 'unbounded-cloud.io/site': 'test' },
      RegisterWithTaints: [],
    },
    ...overrides,
  };
}
