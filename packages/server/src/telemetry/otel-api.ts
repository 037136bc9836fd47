/*
 * The part of `@opentelemetry/api` the middleware uses, declared here instead of imported (as Kysely declares the part
 * of `pg` it needs): the package never loads the optional peer, and its types compile where the peer is absent. The
 * app passes the module itself (`import * as otel from '@opentelemetry/api'`), which fits these shapes.
 */

/** Attribute values as OpenTelemetry takes them. */
export type OtelAttributes = Record<string, string | number | boolean | undefined>;

/** An OpenTelemetry `Context`: opaque here. */
export type OtelContext = object;

export interface OtelSpan {
  setAttribute(key: string, value: string | number | boolean): unknown;
  setStatus(status: { code: number }): unknown;
  end(endTime?: number): void;
}

export interface OtelTracer {
  startSpan(
    name: string,
    options?: { attributes?: OtelAttributes; startTime?: number },
    context?: OtelContext,
  ): OtelSpan;
}

export interface OtelCounter {
  add(value: number, attributes?: OtelAttributes): void;
}

export interface OtelHistogram {
  record(value: number, attributes?: OtelAttributes): void;
}

export interface OtelMeter {
  createCounter(name: string, options?: { description?: string; unit?: string }): OtelCounter;
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } },
  ): OtelHistogram;
}

/** `@opentelemetry/api` as far as the middleware reads it: pass the module itself. */
export interface OpenTelemetryApi {
  trace: {
    getTracer(name: string, version?: string): OtelTracer;
    setSpan(context: OtelContext, span: OtelSpan): OtelContext;
  };
  context: {
    active(): OtelContext;
    with<T>(context: OtelContext, fn: () => T): T;
  };
  metrics: { getMeter(name: string, version?: string): OtelMeter };
}
