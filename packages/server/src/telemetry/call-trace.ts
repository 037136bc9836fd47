import { TRPCError } from '@trpc/server';
import { isIdempotencyError } from '../errors/idempotency-error.js';
import type { IdempotencyEventType } from '../events.js';
import { ATTR, type ChildSpanName, SPAN, STATUS_ERROR } from './names.js';
import type { OtelAttributes, OtelContext, OtelSpan } from './otel-api.js';
import type { Telemetry } from './telemetry.js';

/** tRPC codes answered with a 5xx: a failure of the server, the span's status is ERROR. */
const SERVER_ERRORS = new Set(['INTERNAL_SERVER_ERROR', 'NOT_IMPLEMENTED', 'BAD_GATEWAY', 'SERVICE_UNAVAILABLE']);

/** Epoch ms of a performance.now() reading, the time input every OpenTelemetry SDK takes. */
const epoch = (at: number) => performance.timeOrigin + at;

/**
 * One call's spans and metrics: the call span, its children (claim, wait, handler, steps, completion, replay) and
 * one count per outcome. Never an attribute with the key, the scope or the input: only the mode, the database, the
 * procedure path, the outcome, the wait and the takeover.
 */
export class CallTrace {
  readonly #t: Telemetry;
  readonly #span: OtelSpan;
  readonly #context: OtelContext;
  /** The metrics' attributes: mode, database, path. */
  readonly #attributes: OtelAttributes;
  /** While the handler runs: its context, the parent of step spans. */
  #handlerContext: OtelContext | undefined;
  /** performance.now() before the in-process gate, before the last claim, and when lease mode began to poll. */
  #gateAt: number | undefined;
  #claimAt: number | undefined;
  #pollingSince: number | undefined;
  #waitedMs: number | undefined;
  #takeover = false;

  constructor(t: Telemetry, path: string) {
    this.#t = t;
    this.#attributes = { [ATTR.mode]: t.mode, [ATTR.dbSystem]: t.dbSystem, [ATTR.path]: path };
    this.#span = t.tracer.startSpan(SPAN.call, { attributes: this.#attributes }, t.api.context.active());
    this.#context = t.api.trace.setSpan(t.api.context.active(), this.#span);
  }

  /** Before the in-process gate: a wait there starts now. */
  gate(): void {
    this.#gateAt = performance.now();
  }

  /** Lease mode, before each pause of its polling: the wait started at the first. */
  polling(): void {
    this.#pollingSince ??= performance.now();
  }

  /** One outcome event (events.ts): its counter, the call's outcome attribute, and a wait span for a wait. */
  event(type: IdempotencyEventType): void {
    this.#t.instruments.outcomes[type]?.add(1, this.#attributes);
    if (type === 'taken_over') this.#takeover = true;
    else if (type === 'waited' || type === 'conflict') this.#endWait();
    if (type !== 'waited' && type !== 'taken_over') this.#span.setAttribute(ATTR.outcome, type);
  }

  /**
   * The wait that just ended: in the gate when no claim was sent yet; else lease mode's polling, or transaction
   * mode's claim (which blocks on the original's row). A lease-mode conflict that never polled waited for nothing.
   */
  #endWait(): void {
    const from =
      this.#claimAt === undefined
        ? this.#gateAt
        : (this.#pollingSince ?? (this.#t.mode === 'transaction' ? this.#claimAt : undefined));
    this.#pollingSince = undefined;
    if (from === undefined) return;
    const now = performance.now();
    this.#t.tracer.startSpan(SPAN.wait, { startTime: epoch(from) }, this.#context).end(epoch(now));
    this.#waitedMs = (this.#waitedMs ?? 0) + (now - from);
  }

  /** A child span around `fn`. The claim's also feeds the claim-latency histogram. */
  async span<T>(name: ChildSpanName, fn: () => Promise<T>): Promise<T> {
    const span = this.#t.tracer.startSpan(name, undefined, this.#context);
    const startedAt = performance.now();
    if (name === SPAN.claim) this.#claimAt = startedAt;
    try {
      return await fn();
    } catch (error) {
      markError(span, error);
      throw error;
    } finally {
      span.end();
      if (name === SPAN.claim) {
        this.#t.instruments.claimDuration.record((performance.now() - startedAt) / 1000, this.#attributes);
      }
    }
  }

  /** The handler span, active while the handler runs: the handler's own spans (a provider's fetch) nest under it. */
  async handler<T>(fn: () => Promise<T>): Promise<T> {
    const span = this.#t.tracer.startSpan(SPAN.handler, undefined, this.#context);
    const context = this.#t.api.trace.setSpan(this.#context, span);
    this.#handlerContext = context;
    try {
      const result = await this.#t.api.context.with(context, fn);
      markResult(span, result);
      return result;
    } catch (error) {
      markError(span, error);
      throw error;
    } finally {
      this.#handlerContext = undefined;
      span.end();
    }
  }

  /** The replay span (synchronous: decoding the stored outcome). */
  replay(): OtelSpan {
    return this.#t.tracer.startSpan(SPAN.replay, undefined, this.#context);
  }

  /** A durable step's span, under the handler's. */
  step(name: string, index: number): StepTrace {
    const span = this.#t.tracer.startSpan(
      SPAN.step,
      { attributes: { [ATTR.stepName]: name, [ATTR.stepIndex]: index } },
      this.#handlerContext ?? this.#context,
    );
    return new StepTrace(this.#t, span, this.#attributes);
  }

  /** Ends the call span with what the middleware returned or threw. */
  end(result: unknown, thrown?: unknown): void {
    if (this.#waitedMs !== undefined) this.#span.setAttribute(ATTR.waitedMs, Math.round(this.#waitedMs));
    if (this.#t.mode === 'lease') this.#span.setAttribute(ATTR.takeover, this.#takeover);
    if (thrown !== undefined) markError(this.#span, thrown);
    else markResult(this.#span, result);
    this.#span.end();
  }
}

/** One durable step: replayed from its record, or run with its span active. */
export class StepTrace {
  readonly #t: Telemetry;
  readonly #span: OtelSpan;
  readonly #attributes: OtelAttributes;

  constructor(t: Telemetry, span: OtelSpan, attributes: OtelAttributes) {
    this.#t = t;
    this.#span = span;
    this.#attributes = attributes;
  }

  replayed(): void {
    this.#span.setAttribute(ATTR.stepReplayed, true);
    this.#t.instruments.stepReplays.add(1, this.#attributes);
  }

  run<T>(fn: () => T): T {
    this.#span.setAttribute(ATTR.stepReplayed, false);
    this.#t.instruments.stepExecutions.add(1, this.#attributes);
    return this.#t.api.context.with(this.#t.api.trace.setSpan(this.#t.api.context.active(), this.#span), fn);
  }

  end(error?: unknown): void {
    if (error !== undefined) markError(this.#span, error);
    this.#span.end();
  }
}

/** A failed middleware or handler result (`{ ok: false, error }`) marks the span like a thrown error. */
function markResult(span: OtelSpan, result: unknown): void {
  const { ok, error } = (result ?? {}) as { ok?: unknown; error?: unknown };
  if (ok === false) markError(span, error);
}

/**
 * `error.type` names what failed, never its message (which may quote the key): the idempotency reason, else the tRPC
 * code, else the error's class. A 4xx is the client's: only a server failure sets the span's status to ERROR.
 */
function markError(span: OtelSpan, error: unknown): void {
  const cause = error instanceof TRPCError ? error.cause : error;
  const type = isIdempotencyError(cause)
    ? cause.reason
    : error instanceof TRPCError
      ? error.code
      : error instanceof Error
        ? error.name
        : '_OTHER';
  span.setAttribute(ATTR.errorType, type);
  if (!(error instanceof TRPCError) || SERVER_ERRORS.has(error.code)) span.setStatus({ code: STATUS_ERROR });
}

/** `fn` inside a child span of the call's, or alone without telemetry. */
export function traced<T>(trace: CallTrace | undefined, name: ChildSpanName, fn: () => Promise<T>): Promise<T> {
  return trace ? trace.span(name, fn) : fn();
}
