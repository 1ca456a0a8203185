import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { CleanupStack } from '../../../src/daemon/cleanup-stack.js';

describe('CleanupStack', () => {
  it('runs every step once, newest first, past a failing one', async () => {
    const ran: string[] = [];
    const stack = new CleanupStack(pino({ level: 'silent' }));
    stack.push('pid', () => void ran.push('pid'));
    stack.push('socket', async () => {
      ran.push('socket');
      throw new Error('EBUSY');
    });
    stack.push('watcher', async () => void ran.push('watcher'));
    await Promise.all([stack.unwind(), stack.unwind()]);
    await stack.unwind();
    expect(ran).toEqual(['watcher', 'socket', 'pid']);
    expect(() => stack.push('late', () => undefined)).toThrow(/after the clean-up ran/);
  });
});
