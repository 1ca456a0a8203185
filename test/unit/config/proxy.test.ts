import { describe, expect, it } from 'vitest';
import { DIRECT, describeProxy, proxyFor, proxyFromEnv } from '../../../src/config/proxy.js';

const via = (env: NodeJS.ProcessEnv, url: string): string | null =>
  proxyFor(proxyFromEnv(env), new URL(url))?.href ?? null;

describe('proxyFromEnv', () => {
  it('reads nothing from an environment without proxy variables: every request is direct', () => {
    expect(proxyFromEnv({ PATH: '/usr/bin' })).toEqual(DIRECT);
    expect(describeProxy(proxyFromEnv({}))).toBeNull();
  });

  it('takes HTTPS_PROXY for https URLs and HTTP_PROXY for http ones, the upper-case name first', () => {
    const env = {
      HTTPS_PROXY: 'http://s.proxy:3128',
      https_proxy: 'http://lower:1',
      http_proxy: 'p.proxy:8080',
    };
    expect(via(env, 'https://dl.k8s.io/x')).toBe('http://s.proxy:3128/');
    // No scheme: http://, as Go reads it.
    expect(via(env, 'http://mirror.example/x')).toBe('http://p.proxy:8080/');
    expect(via({ HTTP_PROXY: 'http://p:1' }, 'https://dl.k8s.io/x')).toBeNull();
    expect(via({ https_proxy: 'http://lower:1' }, 'https://dl.k8s.io/x')).toBe('http://lower:1/');
  });

  it('reaches NO_PROXY hosts, ranges and ports directly, and localhost and loopback always', () => {
    const env = {
      HTTPS_PROXY: 'http://proxy:3128',
      HTTP_PROXY: 'http://proxy:3128',
      NO_PROXY:
        'corp.example, .svc.local, *.internal, 10.0.0.0/8, 192.168.1.7, fd00::/8, registry.example:5000',
    };
    const direct = [
      'https://corp.example/x',
      'https://git.corp.example/x',
      'https://a.svc.local/x',
      'https://b.internal/x',
      'http://10.1.2.3:8080/x',
      'http://192.168.1.7/x',
      'http://[fd00::1]/x',
      'https://registry.example:5000/v2/',
      'http://localhost:8080/x',
      'http://127.0.0.53/x',
      'http://[::1]:5000/x',
      // A trailing dot, in the URL or in the entry, names the same host.
      'https://corp.example./x',
    ];
    for (const url of direct) expect(via(env, url), url).toBeNull();
    const proxied = [
      'https://dl.k8s.io/x',
      'https://notcorp.example/x',
      // A leading dot or *. covers subdomains only, as in Go.
      'https://svc.local/x',
      'https://internal/x',
      'http://11.0.0.1/x',
      'http://192.168.1.8/x',
      'https://registry.example/v2/',
    ];
    for (const url of proxied) expect(via(env, url), url).toBe('http://proxy:3128/');
    expect(via({ ...env, NO_PROXY: '*' }, 'https://dl.k8s.io/x')).toBeNull();
    expect(via({ ...env, NO_PROXY: 'k8s.io.' }, 'https://dl.k8s.io/x')).toBeNull();
    expect(via({ ...env, NO_PROXY: '' }, 'http://10.1.2.3/x')).toBe('http://proxy:3128/');
  });

  it('refuses a value it could not follow, naming the variable and the value', () => {
    const bad: Array<[NodeJS.ProcessEnv, RegExp]> = [
      [
        { HTTPS_PROXY: 'socks5://p:1080' },
        /HTTPS_PROXY="socks5:\/\/p:1080": socks5 proxies are not supported/,
      ],
      [{ http_proxy: 'http://p:99999' }, /http_proxy="http:\/\/p:99999": not a proxy URL/],
      [{ HTTP_PROXY: 'http://p:3128/path' }, /HTTP_PROXY=.*with no path/],
      [{ NO_PROXY: 'ok.example,10.0.0.0/33' }, /NO_PROXY: entry "10.0.0.0\/33": not a CIDR range/],
      [{ no_proxy: 'bad host' }, /no_proxy: entry "bad host": not a host name/],
      [{ NO_PROXY: 'h.example:0' }, /NO_PROXY: entry "h.example:0": the port/],
    ];
    for (const [env, message] of bad) {
      expect(() => proxyFromEnv(env), JSON.stringify(env)).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringMatching(message) }),
      );
    }
  });

  it('never shows the credentials of a value it refuses', () => {
    const bad = [
      { HTTPS_PROXY: 'http://user:secret@host:bad' },
      { https_proxy: 'user:secret@proxy.corp:99999' },
      { HTTP_PROXY: 'socks5://user:secret@proxy:1080' },
      { HTTP_PROXY: 'http://user:secret@proxy:3128/path' },
      { HTTP_PROXY: 'http://user:p@ss:secret@proxy:3128/path' },
      { HTTPS_PROXY: 'http://token-secret@:3128' },
    ];
    for (const env of bad) {
      let message = '';
      try {
        proxyFromEnv(env);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message, JSON.stringify(env)).toMatch(/^(HTTPS?_PROXY|https_proxy)="[a-z0-9]*:?\/?\/?\*\*\*@/);
      expect(message, JSON.stringify(env)).not.toContain('secret');
      expect(message, JSON.stringify(env)).not.toMatch(/user:(secret|p@ss)/);
    }
    expect(() => proxyFromEnv({ HTTPS_PROXY: 'http://user:secret@host:bad' })).toThrow(
      'HTTPS_PROXY="http://***@host:bad": not a proxy URL',
    );
  });

  it('describes the proxy for the log without its credentials', () => {
    expect(
      describeProxy(proxyFromEnv({ HTTPS_PROXY: 'http://user:secret@proxy:3128', NO_PROXY: '.corp' })),
    ).toEqual({ HTTPS_PROXY: 'http://***@proxy:3128', NO_PROXY: '.corp' });
  });
});
