/**
 * The operation event bus: phase and state transitions, and progress, published by the engine
 * and streamed to clients as server-sent events (`GET /v1/events`).
 */
import { EventEmitter } from 'node:events';
import type { Operation, PhaseState } from './operation.js';

export type EngineEvent =
  | { type: 'operation'; operation: Operation }
  | { type: 'phase'; operationId: string; phase: string; state: PhaseState; at: string; error?: string }
  | {
      type: 'progress';
      operationId: string;
      phase: string;
      task: string;
      message?: string;
      bytes?: number;
      totalBytes?: number;
      at: string;
    };

export class EventBus {
  readonly #emitter = new EventEmitter();
  #seq = 0;

  constructor() {
    // Every SSE client is one listener; many operators may follow at once.
    this.#emitter.setMaxListeners(0);
  }

  publish(event: EngineEvent): void {
    this.#seq += 1;
    this.#emitter.emit('event', this.#seq, event);
  }

  /** Subscribe; returns the unsubscribe function. */
  subscribe(listener: (seq: number, event: EngineEvent) => void): () => void {
    this.#emitter.on('event', listener);
    return () => this.#emitter.off('event', listener);
  }

  /** Sequence number of the last event (changes whenever anything is published). */
  get seq(): number {
    return this.#seq;
  }

  get listenerCount(): number {
    return this.#emitter.listenerCount('event');
  }
}
