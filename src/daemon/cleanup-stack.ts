/**
 * The daemon's clean-up steps, one stack shared by the failure path of startup and by shutdown:
 * every part that startup brings up pushes the step that takes it down, so whatever got
 * started is stopped, in reverse order, and nothing is left behind either way. Every step is
 * guarded: one that fails is logged and the rest still run.
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';

interface Step {
  name: string;
  run: () => Promise<void> | void;
}

export class CleanupStack {
  readonly #steps: Step[] = [];
  #unwound: Promise<void> | null = null;

  constructor(private readonly logger: Pick<Logger, 'warn' | 'debug'>) {}

  /** Add the step that undoes what was just brought up; steps run last-in, first-out. */
  push(name: string, run: () => Promise<void> | void): void {
    if (this.#unwound !== null) throw new Error(`clean-up step ${name} added after the clean-up ran`);
    this.#steps.push({ name, run });
  }

  /** Run every step once, newest first; a second call waits for the first. Never throws. */
  unwind(): Promise<void> {
    this.#unwound ??= (async () => {
      for (const step of this.#steps.reverse()) {
        try {
          await step.run();
          this.logger.debug({ step: step.name }, `clean-up step done: ${step.name}`);
        } catch (err) {
          this.logger.warn(
            { step: step.name, err: describeError(err) },
            `clean-up step failed: ${step.name}; continuing`,
          );
        }
      }
    })();
    return this.#unwound;
  }
}
