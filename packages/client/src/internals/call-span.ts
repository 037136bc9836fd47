/*
 * The part of `@opentelemetry/api` the link uses, declared instead of imported: the package never loads the optional
 * peer, and its types compile without it. The app passes the module itself (its namespace
 * import, `* as otel`), which fits.
 */

type Attributes = Record<string, string | number | boolean | undefined>;

interface OtelSpan {
  setAttribute(key: string, value: string | number | boolean): unknown;
  addEvent(name: string, attributes?: Attributes): unknown;
  setStatus(status: { code: number }): unknown;
  end(): void;
}

/** `@opentelemetry/api` as far as the link reads it: pass the module itself. */
export interface OpenTelemetryApi {
  trace: {
    getTracer(
      name: string,
      version?: string,
    ): {
      startSpan(name: string, options?: { attributes?: Attributes }, context?: object): OtelSpan;
    };
    setSpan(context: object, span: OtelSpan): object;
  };
  context: {
    active(): object;
    with<T>(context: object, fn: () => T): T;
  };
}

/** `SpanStatusCode.ERROR`. */
const STATUS_ERROR = 2;

/**
 * One logical call's span (`trpc_idempotency.client.call`): one event per attempt, with its number, the backoff
 * before it and how it ended, then the attempts and the replay flag. Never the key or the input.
 */
export class CallSpan {
  readonly #api: OpenTelemetryApi;
  readonly #span: OtelSpan;
  readonly #context: object;
  #ended = false;

  constructor(api: OpenTelemetryApi, path: string) {
    this.#api = api;
    this.#span = api.trace
      .getTracer('@trpc-idempotency/client')
      .startSpan('trpc_idempotency.client.call', { attributes: { 'trpc_idempotency.path': path } });
    this.#context = api.trace.setSpan(api.context.active(), this.#span);
  }

  /** Runs `fn` (sending an attempt) with the call's span active, so an instrumented fetch nests under it. */
  within<T>(fn: () => T): T {
    return this.#api.context.with(this.#context, fn);
  }

  /** One attempt ended: with an answer (`error` undefined), or with the error it failed with. */
  attempt(attempt: number, delayMs: number, error?: unknown): void {
    this.#span.addEvent('trpc_idempotency.attempt', {
      'trpc_idempotency.attempt': attempt,
      'trpc_idempotency.delay_ms': Math.round(delayMs),
      ...describeError(error),
    });
  }

  /** The call settled (or was unsubscribed): its attempts and replay flag, and what it failed with. */
  end(attempts: number, replayed: boolean, error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#span.setAttribute('trpc_idempotency.attempts', attempts);
    this.#span.setAttribute('trpc_idempotency.replayed', replayed);
    if (error !== undefined) {
      for (const [key, value] of Object.entries(describeError(error))) {
        if (value !== undefined) this.#span.setAttribute(key, value);
      }
      this.#span.setStatus({ code: STATUS_ERROR });
    }
    this.#span.end();
  }
}

/**
 * The semantic conventions' `error.type` (the idempotency reason, the tRPC code, the HTTP status, or the error's
 * class: a network failure's or a timeout's) and
 * `http.response.status_code` when the server answered; never the message, which may quote the key.
 */
function describeError(error: unknown): Attributes {
  if (error === undefined) return {};
  const { data, cause, name } = (error ?? {}) as {
    data?: { idempotency?: { reason?: unknown }; code?: unknown; httpStatus?: unknown };
    cause?: { name?: unknown };
    name?: unknown;
  };
  const reason = data?.idempotency?.reason;
  const status = typeof data?.httpStatus === 'number' ? data.httpStatus : undefined;
  const type =
    typeof reason === 'string'
      ? reason
      : typeof data?.code === 'string'
        ? data.code
        : status !== undefined
          ? String(status)
          : typeof cause?.name === 'string'
            ? cause.name
            : typeof name === 'string'
              ? name
              : '_OTHER';
  return { 'error.type': type, 'http.response.status_code': status };
}
