/** The one redactor (src/config/redact.ts): each kind of secret, in text and in data. */
import { describe, expect, it } from 'vitest';
import {
  REDACTED,
  redactDeep,
  redactImageReference,
  redactText,
  redactUrl,
} from '../../../src/config/redact.js';

describe('redactText', () => {
  it.each([
    ['http://user:S3cret@mirror.corp/dl/kubelet', 'http://***@mirror.corp/dl/kubelet'],
    ['GET https://tok@registry.corp/v2/ answered 500', 'GET https://***@registry.corp/v2/ answered 500'],
    ['from "http://u:p@127.0.0.1:8080/x": reset', 'from "http://***@127.0.0.1:8080/x": reset'],
    ['denied: Authorization: Bearer eyJhbGciOi.S3cret.sig', `denied: Authorization: Bearer ${REDACTED}`],
    ['echo: authorization: Basic dXNlcjpTM2NyZXQ=', `echo: authorization: Basic ${REDACTED}`],
    ['header {"Authorization":"S3cretRaw"}', `header {"Authorization":"${REDACTED}"}`],
    ['bearer abcdefghij', `bearer ${REDACTED}`],
  ])('%s', (text, want) => {
    expect(redactText(text)).toBe(want);
  });

  it("leaves texts without credentials as they are, agentd's own words included", () => {
    for (const text of [
      'agentd supports the Bearer token flow and Basic auth',
      'registry.corp/kube/node:1.34@sha256:0123',
      'download kubelet 1.34.0 from https://dl.k8s.io/v1.34.0/bin/linux/amd64/kubelet',
      'mail root@localhost',
    ])
      expect(redactText(text)).toBe(text);
  });
});

describe('redactUrl and redactImageReference', () => {
  it('drop userinfo, keep the rest', () => {
    expect(redactUrl(new URL('http://u:p@h:1/x?y'))).toBe('http://***@h:1/x?y');
    expect(redactUrl(new URL('http://h/x'))).toBe('http://h/x');
    expect(redactImageReference('user:S3cret@registry.corp/kube/node:1.34')).toBe(
      '***@registry.corp/kube/node:1.34',
    );
    expect(redactImageReference('busybox:1.36@sha256:abc')).toBe('busybox:1.36@sha256:abc');
    expect(redactImageReference('registry.corp/a@sha256:abc')).toBe('registry.corp/a@sha256:abc');
  });
});

describe('redactDeep', () => {
  it('secret keys, exec credential args and env, and every string', () => {
    const input = {
      Kubelet: {
        Auth: {
          BootstrapToken: 'abcdef.0123456789abcdef',
          ExecCredential: {
            command: '/usr/bin/cred',
            args: ['--token', 'S3cretArg'],
            env: [{ name: 'K', value: 'S3cretEnv' }],
          },
        },
      },
      Downloads: { Kubernetes: { BaseURL: 'http://u:S3cretPass@mirror/' } },
      headers: { authorization: 'Bearer S3cretBearer' },
      list: ['ok', 'http://a:S3cretList@h/'],
      n: 3,
    };
    const out = redactDeep(input);
    expect(JSON.stringify(out)).not.toMatch(/S3cret|abcdef\.0123/);
    expect(out.Kubelet.Auth.ExecCredential).toEqual({
      command: '/usr/bin/cred',
      args: [REDACTED, REDACTED],
      env: [{ name: 'K', value: REDACTED }],
    });
    expect(out.Downloads.Kubernetes.BaseURL).toBe('http://***@mirror/');
    expect(out.n).toBe(3);
    // The input is not changed.
    expect(input.Kubelet.Auth.BootstrapToken).toBe('abcdef.0123456789abcdef');
  });
});
