import { describe, expect, it } from 'vitest';
import type { Machine } from '../../../src/kube/index.js';
import { MachineCache } from '../../../src/watcher/machine-cache.js';

const at = (rv: string, phase = `p${rv}`): Machine =>
  ({ metadata: { name: 'm', resourceVersion: rv }, spec: {}, status: { phase } }) as unknown as Machine;

describe('MachineCache', () => {
  it('knows nothing before a list and after a delete, and follows the watch in between', () => {
    const cache = new MachineCache();
    expect(cache.get()).toBeUndefined();
    cache.listed(at('1'));
    cache.observed(at('2'));
    expect(cache.get()?.metadata.resourceVersion).toBe('2');
    cache.deleted();
    expect(cache.get()).toBeUndefined();
  });

  it('keeps its own write until the watch delivers it, passing over the older events still on their way', () => {
    const cache = new MachineCache();
    cache.listed(at('1'));
    cache.wrote(at('5', 'written'));
    // Another writer's change at 3 and its own earlier write at 4 were still on their way.
    cache.observed(at('3'));
    cache.observed(at('4'));
    expect(cache.get()?.status?.phase).toBe('written');
    cache.observed(at('5', 'written'));
    cache.observed(at('6'));
    expect(cache.get()?.metadata.resourceVersion).toBe('6');
  });

  it('ignores a write whose event the watch delivered first, even with newer events after it', () => {
    const cache = new MachineCache();
    cache.listed(at('1'));
    cache.observed(at('5'));
    cache.observed(at('6'));
    cache.wrote(at('5'));
    expect(cache.get()?.metadata.resourceVersion).toBe('6');
    cache.observed(at('7'));
    expect(cache.get()?.metadata.resourceVersion).toBe('7');
  });

  it('takes a new list over a write it still waits for', () => {
    const cache = new MachineCache();
    cache.listed(at('1'));
    cache.wrote(at('5'));
    cache.listed(at('9'));
    cache.observed(at('10'));
    expect(cache.get()?.metadata.resourceVersion).toBe('10');
  });
});
