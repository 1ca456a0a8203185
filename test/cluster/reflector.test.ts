/**
 * agentd's one reflector (src/kube/reflector.ts) against a real kube-apiserver: the watch asks for
 * bookmarks, kube-apiserver sends them, and a watch that ends resumes from the bookmark's
 * resourceVersion without a list.
 *
 * When a bookmark comes: kube-apiserver's watch cache (k8s.io/apiserver v0.34.4,
 * pkg/storage/cacher/cache_watcher.go, `nextBookmarkTime`) sends one to a watch that allows them
 * about every minute and 2 s before the watch's deadline, which `timeoutSeconds` sets. So a watch
 * asked to end after 5 s gets a bookmark about 3 s in, then ends: the test waits for those events,
 * never a fixed time. The bookmark carries the watch cache's latest resourceVersion of the
 * resource, which moves on with writes to other Machines that the watch (a field selector on one
 * name) does not deliver: resuming from it, not from the list's, is what spares the server the
 * replay (and a client without it a list after compaction).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/host/clock.js';
import {
  createKubeClients,
  createReflector,
  type KubeClients,
  type Reflector,
} from '../../src/kube/index.js';
import { machinePath } from '../support/control-plane/agent.js';
import { auditEvents, bootstrapUser } from '../support/control-plane/audit.js';
import { controlPlaneAvailable, type KubeJson } from '../support/control-plane/index.js';
import { useControlPlane } from '../support/control-plane/use.js';
import { waitUntil } from '../support/daemon.js';

const MACHINES = '/apis/unbounded-cloud.io/v1alpha3/machines';
const WATCH_SECONDS = 5;

describe.skipIf(!controlPlaneAvailable())('the reflector against kube-apiserver', () => {
  const cp = useControlPlane({ apiServer: { audit: true } });
  let reflector: Reflector | null = null;
  let dir: string | null = null;
  afterEach(async () => {
    await reflector?.stop();
    reflector = null;
    if (dir !== null) await rm(dir, { recursive: true, force: true });
    dir = null;
  });

  /** agentd's clients for the bootstrap token, as a node's --kubeconfig gives them. */
  async function nodeClients(): Promise<KubeClients> {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-reflector-'));
    const file = path.join(dir, 'kubeconfig');
    await writeFile(file, cp().tokenKubeconfig(cp().bootstrapToken.token), { mode: 0o600 });
    const clients = createKubeClients({
      kubeconfigPath: file,
      crdGroup: 'unbounded-cloud.io',
      inCluster: false,
    });
    if (!('kc' in clients)) throw new Error(`no clients: ${clients.reason}`);
    return clients;
  }

  const machine = (name: string): KubeJson => ({
    apiVersion: 'unbounded-cloud.io/v1alpha3',
    kind: 'Machine',
    metadata: { name },
    spec: { kubernetes: { bootstrapTokenRef: { name: `bootstrap-token-${cp().bootstrapToken.id}` } } },
  });

  it('asks for bookmarks, gets them from kube-apiserver, and resumes from the bookmark without a list', async () => {
    const name = 'bookmarked';
    await cp().api.create(MACHINES, machine(name));
    await cp().api.create(MACHINES, machine('elsewhere'));
    const clients = await nodeClients();
    const query = { fieldSelector: `metadata.name=${name}` };
    const lists: string[] = [];
    const bookmarks: string[] = [];
    const restarts: string[] = [];
    const failures: string[] = [];
    reflector = createReflector<KubeJson>({
      what: `Machine ${name}`,
      async list() {
        const list = (await clients.custom.listClusterCustomObject({
          group: 'unbounded-cloud.io',
          version: 'v1alpha3',
          plural: 'machines',
          fieldSelector: query.fieldSelector,
        })) as KubeJson;
        lists.push(list.metadata.resourceVersion as string);
        return {
          items: list.items as unknown[],
          resourceVersion: list.metadata.resourceVersion as string,
          target: { kc: clients.kc, transport: clients.transport, path: MACHINES, query },
        };
      },
      decode: (object) => object as KubeJson,
      onList: () => undefined,
      onEvent: () => undefined,
      onBookmark: (rv) => bookmarks.push(rv),
      onRestart: (reason) => restarts.push(reason),
      onFailure: (err) => failures.push(err.message),
      clock: systemClock,
      timeoutSeconds: () => WATCH_SECONDS,
    });
    void reflector.start();
    await waitUntil('the list', () => lists.length === 1);
    const listed = BigInt(lists[0]!);
    // Writes the watch does not deliver (another Machine) move the resource's version on.
    for (let i = 0; i < 3; i++) {
      await cp().api.mergePatch(machinePath('elsewhere'), { metadata: { labels: { n: String(i) } } });
    }
    await waitUntil('a bookmark past the writes elsewhere', () =>
      bookmarks.some((rv) => BigInt(rv) > listed),
    );
    const bookmark = bookmarks.find((rv) => BigInt(rv) > listed)!;
    await waitUntil('the watch to end at its timeout and start again', async () => {
      if (restarts.length === 0) return false;
      return (await watchesOf(name)).length >= 2;
    });

    const watches = await watchesOf(name);
    // Each watch asked for bookmarks and for the deadline that brings one.
    for (const w of watches) {
      expect(w.searchParams.get('allowWatchBookmarks')).toBe('true');
      expect(w.searchParams.get('timeoutSeconds')).toBe(String(WATCH_SECONDS));
    }
    expect(watches[0]!.searchParams.get('resourceVersion')).toBe(lists[0]);
    // The next watch resumed from the last bookmark before it ended (the first is the one past the
    // writes, or a later one), not from the list's version.
    const resumedFrom = watches[1]!.searchParams.get('resourceVersion')!;
    expect(BigInt(resumedFrom)).toBeGreaterThanOrEqual(BigInt(bookmark));
    expect(bookmarks).toContain(resumedFrom);
    expect(restarts[0]).toBe('closed');
    // No list again: one in the reflector, one in kube-apiserver's audit log.
    expect(lists).toHaveLength(1);
    const listed$ = (await auditEvents(cp(), bootstrapUser(cp()))).filter(
      (e) => e.verb === 'list' && e.objectRef?.resource === 'machines',
    );
    expect(listed$).toHaveLength(1);
    expect(failures).toEqual([]);
    expect(reflector.failures).toBe(0);
  });

  /** The reflector's watch requests for the Machine as they began, oldest first (the audit log). */
  async function watchesOf(name: string): Promise<URL[]> {
    return (await auditEvents(cp(), bootstrapUser(cp()), 'ResponseStarted'))
      .filter((e) => e.verb === 'watch' && e.objectRef?.resource === 'machines')
      .map((e) => new URL(e.requestURI as string, 'https://kube-apiserver'))
      .filter((u) => u.searchParams.get('fieldSelector') === `metadata.name=${name}`);
  }
});
