/**
 * A program run by test/unit/bin/run.test.ts through `runProgram`: its main writes OUT_BYTES
 * bytes to stdout, leaves a timer pending that prints "timer fired" when it runs, and settles
 * with exit code 7 (or throws, with MAIN_THROWS=1). EXIT_WHEN_SETTLED=1 passes that option.
 */
import { runProgram } from '../../src/bin/run.js';

const bytes = Number(process.env.OUT_BYTES ?? 0);

runProgram(
  'child',
  async () => {
    process.stdout.write('x'.repeat(bytes));
    setTimeout(() => process.stdout.write('timer fired'), Number(process.env.TIMER_MS ?? 200));
    if (process.env.MAIN_THROWS === '1') throw new Error('main failed');
    return 7;
  },
  { exitWhenSettled: process.env.EXIT_WHEN_SETTLED === '1' },
);
