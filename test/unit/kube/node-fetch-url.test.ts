import url from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from '../../../src/kube/node-fetch-url.js';

// What node-fetch 2 hands `parse`: the WHATWG parser's normalized text of an absolute URL. The
// legacy parser is called here only to compare with (the deprecation it prints is the reason for
// the module under test).
const normalized = (text: string): string => new URL(text).toString();
const FIELDS = [
  'protocol',
  'slashes',
  'auth',
  'host',
  'port',
  'hostname',
  'hash',
  'search',
  'query',
  'pathname',
  'path',
  'href',
] as const;
const legacy = (text: string) => {
  const u = url.parse(text);
  return Object.fromEntries(FIELDS.map((f) => [f, u[f]]));
};

describe('node-fetch-url parse', () => {
  it.each([
    'https://10.96.0.1:443/apis/agentd.io/v1alpha1/machines/node-1?watch=true&resourceVersion=42&allowWatchBookmarks=true',
    'http://127.0.0.1:34567/api/v1/nodes/node-1',
    'https://kube.example.com/api/v1/namespaces/kube-system/pods?fieldSelector=spec.nodeName%3Dnode-1',
    'https://[fd00::1]:6443/api/v1/nodes?limit=500#frag',
    'https://user:p%40ss@api.example.com:8443/healthz',
    'https://api.example.com/a%20b/c?x=%2F',
  ])('gives the legacy parser’s fields for %s', (text) => {
    const t = normalized(text);
    expect(parse(t)).toEqual(legacy(t));
  });

  it('gives an IPv6 hostname without brackets, as http.request wants it', () => {
    expect(parse('https://[fd00::1]:6443/x')).toMatchObject({
      hostname: 'fd00::1',
      host: '[fd00::1]:6443',
      port: '6443',
    });
  });

  it('gives a relative URL no protocol and no host, which node-fetch rejects as it did', () => {
    expect(parse('/api/v1/nodes')).toMatchObject({ protocol: null, hostname: null, href: '/api/v1/nodes' });
  });
});
