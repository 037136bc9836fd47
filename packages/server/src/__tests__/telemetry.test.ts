import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as otel from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { initTRPC } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createIdempotency, type IdempotencyOptions, idempotencyErrorFormatter } from '../index.js';
import { type AppDB, type Backend, deferred, openBackend, until } from './harness.js';

interface HttpCtx {
  req: IncomingMessage;
  res: ServerResponse;
  userId: string;
}

const spans = new InMemorySpanExporter();
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.DELTA);
const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });

/** What one idempotent app does: a gate to hold its handler, its runs, and the steps its `steps` procedure takes. */
interface Control {
  runs: number;
  gate?: Promise<void>;
  started?: () => void;
  /** Runs inside step `name` after its provider effect. */
  afterStep?: (name: string) => Promise<void>;
  effects: string[];
}

/** One "server instance": an HTTP server whose procedures sit behind idempotency middlewares on `db`. */
async function startServer(
  backend: { db: Kysely<AppDB>; pool?: pg.Pool | undefined },
  opts: { telemetry?: boolean; wait?: number; lease?: number } = {},
) {
  const control: Control = { runs: 0, effects: [] };
  const t = initTRPC.context<HttpCtx>().create({ errorFormatter: idempotencyErrorFormatter });
  const make = (extra: Partial<IdempotencyOptions<HttpCtx, AppDB, true>>) =>
    createIdempotency({
      db: backend.db,
      pool: backend.pool,
      scope: ({ ctx }: { ctx: HttpCtx }) => `user:${ctx.userId}`,
      ...(opts.telemetry === false ? {} : { telemetry: otel }),
      wait: opts.wait ?? 5_000,
      ...extra,
    });
  const tx = make({});
  const lease = make({ mode: 'lease', lease: opts.lease ?? 10_000 });
  const router = t.router({
    pay: t.procedure
      .use(tx.middleware)
      .input(z.object({ amount: z.number() }))
      .mutation(async ({ ctx, input }) => {
        control.runs++;
        await ctx.idempotency.db.insertInto('payments').values({ user_id: ctx.userId, amount: input.amount }).execute();
        control.started?.();
        if (control.gate) await control.gate;
        return { amount: input.amount };
      }),
    steps: t.procedure.use(lease.middleware).mutation(async ({ ctx }) => {
      control.runs++;
      const done: string[] = [];
      for (const name of ['reserve', 'charge', 'notify']) {
        done.push(
          await ctx.idempotency.step(name, async (stepKey) => {
            control.effects.push(`${name}:${stepKey}`);
            await control.afterStep?.(name);
            return name;
          }),
        );
      }
      return done;
    }),
  });
  const server = createHTTPServer({
    router,
    createContext: ({ req, res }) => ({ req, res, userId: String(req.headers['x-user'] ?? 'u') }),
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const post = (path: string, key: string, input?: unknown) =>
    fetch(`${url}/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(input ?? null),
    });
  return { control, post, migrate: () => tx.migrate(), close: () => server.close() };
}

/** Counter sums and histogram counts recorded since the last call, by metric name. */
async function takeMetrics(): Promise<Record<string, number>> {
  await reader.forceFlush();
  const found: Record<string, number> = {};
  for (const resource of metricExporter.getMetrics()) {
    for (const scope of resource.scopeMetrics) {
      for (const metric of scope.metrics) {
        for (const point of metric.dataPoints) {
          const value = point.value as number | { count: number };
          const n = typeof value === 'number' ? value : value.count;
          if (n > 0) found[metric.descriptor.name] = (found[metric.descriptor.name] ?? 0) + n;
        }
      }
    }
  }
  metricExporter.reset();
  return found;
}

const named = (name: string) => spans.getFinishedSpans().filter((s) => s.name === `trpc_idempotency.${name}`);
const childrenOf = (parent: ReadableSpan) =>
  spans
    .getFinishedSpans()
    .filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId)
    .map((s) => s.name.replace('trpc_idempotency.', ''));
/** The one call span with this outcome. */
const callWith = (outcome: string) => {
  const found = named('call').filter((s) => s.attributes['trpc_idempotency.outcome'] === outcome);
  expect(found).toHaveLength(1);
  return found[0] as ReadableSpan;
};

/** Drops what was recorded so far: the next assertions see only what follows. */
async function forget() {
  spans.reset();
  await takeMetrics();
}

let keySeq = 0;
const newKey = () => `otel-${Date.now().toString(36)}-${++keySeq}`;

describe('OpenTelemetry (real Postgres, HTTP, the SDK in-memory exporters)', () => {
  let backend: Backend;
  let app: Awaited<ReturnType<typeof startServer>>;
  const closers: (() => void)[] = [];

  beforeAll(async () => {
    otel.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
    otel.metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
    backend = await openBackend('pg-fast');
    app = await startServer(backend);
    closers.push(app.close);
    await app.migrate();
  });
  afterAll(async () => {
    for (const close of closers) close();
    await backend?.close();
    otel.trace.disable();
    otel.metrics.disable();
  });
  beforeEach(forget);

  /** Starts `pay` with `key` and holds its handler until `release()`, which answers with its response. */
  async function holdPay(key: string, amount: number) {
    const gate = deferred();
    const started = deferred();
    app.control.gate = gate.promise;
    app.control.started = started.resolve;
    const original = app.post('pay', key, { amount });
    await started.promise;
    return () => {
      gate.resolve();
      app.control.gate = undefined;
      return original;
    };
  }

  it('an executed call: a call span with claim, handler and completion, and one execution counted', async () => {
    expect((await app.post('pay', newKey(), { amount: 1 })).status).toBe(200);
    const call = callWith('executed');
    expect(call.attributes).toMatchObject({
      'trpc_idempotency.mode': 'transaction',
      'db.system.name': 'postgresql',
      'trpc_idempotency.path': 'pay',
    });
    expect(childrenOf(call)).toEqual(['claim', 'handler', 'complete']);
    expect(await takeMetrics()).toEqual({ 'trpc_idempotency.executions': 1, 'trpc_idempotency.claim.duration': 1 });
  });

  it('a replayed call: a replay span and one replay counted; no attribute holds the key, scope or input', async () => {
    const key = newKey();
    await app.post('pay', key, { amount: 777_001 });
    await forget();
    const replayed = await app.post('pay', key, { amount: 777_001 });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    const call = callWith('replayed');
    expect(childrenOf(call)).toEqual(['replay']);
    expect(await takeMetrics()).toEqual({ 'trpc_idempotency.replays': 1 });
    const everything = JSON.stringify(spans.getFinishedSpans().map((s) => s.attributes));
    for (const secret of [key, 'user:u', '777001']) expect(everything).not.toContain(secret);
  });

  it('a call that waited for its original on another instance: a wait span, waited_ms, then its replay', async () => {
    const other = await startServer(backend.another());
    closers.push(other.close);
    const key = newKey();
    const release = await holdPay(key, 2);
    const duplicate = other.post('pay', key, { amount: 2 });
    await new Promise((r) => setTimeout(r, 150));
    expect((await release()).status).toBe(200);
    expect((await duplicate).headers.get('idempotent-replayed')).toBe('true');
    const call = callWith('replayed');
    expect(childrenOf(call)).toEqual(['claim', 'wait', 'replay']);
    expect(call.attributes['trpc_idempotency.waited_ms']).toBeGreaterThanOrEqual(100);
    const [wait] = named('wait');
    expect(wait?.parentSpanContext?.spanId).toBe(call.spanContext().spanId);
    expect(await takeMetrics()).toMatchObject({
      'trpc_idempotency.executions': 1,
      'trpc_idempotency.replays': 1,
      'trpc_idempotency.claim.duration': 2,
    });
  });

  it('a duplicate that waited in this process (the in-process gate): its wait span ends with the replay', async () => {
    const key = newKey();
    const release = await holdPay(key, 3);
    const duplicate = app.post('pay', key, { amount: 3 });
    await new Promise((r) => setTimeout(r, 150));
    await release();
    expect((await duplicate).headers.get('idempotent-replayed')).toBe('true');
    const call = callWith('replayed');
    expect(childrenOf(call)).toEqual(['wait', 'replay']);
    expect(call.attributes['trpc_idempotency.waited_ms']).toBeGreaterThanOrEqual(100);
  });

  it('a conflict after wait: a wait span as long as wait, error.type in_progress, one conflict counted', async () => {
    const impatient = await startServer(backend.another(), { wait: 200 });
    closers.push(impatient.close);
    const key = newKey();
    const release = await holdPay(key, 4);
    expect((await impatient.post('pay', key, { amount: 4 })).status).toBe(409);
    await release();
    const call = callWith('conflict');
    expect(call.attributes['error.type']).toBe('in_progress');
    expect(call.status.code).toBe(otel.SpanStatusCode.UNSET); // a 4xx is the client's, not a server failure
    expect(childrenOf(call)).toEqual(['claim', 'wait']);
    expect(call.attributes['trpc_idempotency.waited_ms']).toBeGreaterThanOrEqual(150);
    expect(await takeMetrics()).toMatchObject({ 'trpc_idempotency.conflicts': 1, 'trpc_idempotency.executions': 1 });
  });

  it('a mismatch: error.type payload_mismatch and one mismatch counted', async () => {
    const key = newKey();
    await app.post('pay', key, { amount: 5 });
    await forget();
    expect((await app.post('pay', key, { amount: 6 })).status).toBe(422);
    const call = callWith('mismatch');
    expect(call.attributes['error.type']).toBe('payload_mismatch');
    expect(await takeMetrics()).toEqual({ 'trpc_idempotency.mismatches': 1 });
  });

  // The recorded step is replayed, then the rest run.
  it("a lease-mode takeover of a holder that died in a step: takeover, the step's replay, then the rest", async () => {
    // The holder: its own Kysely on the general path (the fast path's renewal connection would outlive it).
    const other = backend.another();
    const stale = await startServer({ db: other.db }, { lease: 400 });
    const fresh = await startServer(backend, { lease: 400 });
    closers.push(stale.close, fresh.close);
    const key = newKey();
    const hang = deferred();
    stale.control.afterStep = async (name) => {
      if (name === 'charge') await hang.promise;
    };
    const staleCall = stale.post('steps', key);
    staleCall.catch(() => {});
    await until(() => stale.control.effects.length === 2);
    await other.db.destroy(); // the holder "dies": its connections, and the lock its transaction held, are gone
    await forget();
    const answer = await fresh.post('steps', key);
    expect(answer.status).toBe(200);
    hang.resolve();
    const call = callWith('executed');
    expect(call.attributes).toMatchObject({ 'trpc_idempotency.mode': 'lease', 'trpc_idempotency.takeover': true });
    expect(call.attributes['trpc_idempotency.waited_ms']).toBeGreaterThan(0);
    expect(childrenOf(call)).toEqual(expect.arrayContaining(['claim', 'wait', 'handler', 'complete']));
    const [handler] = named('handler');
    const steps = named('step').map((s) => ({
      parent: s.parentSpanContext?.spanId,
      name: s.attributes['trpc_idempotency.step.name'],
      index: s.attributes['trpc_idempotency.step.index'],
      replayed: s.attributes['trpc_idempotency.step.replayed'],
    }));
    const parent = handler?.spanContext().spanId;
    expect(steps).toEqual([
      { parent, name: 'reserve', index: 0, replayed: true },
      { parent, name: 'charge', index: 1, replayed: false },
      { parent, name: 'notify', index: 2, replayed: false },
    ]);
    expect(await takeMetrics()).toMatchObject({
      'trpc_idempotency.takeovers': 1,
      'trpc_idempotency.executions': 1,
      'trpc_idempotency.step.replays': 1,
      'trpc_idempotency.step.executions': 2,
    });
  });

  it('without the telemetry option nothing is traced or counted, though an SDK is registered', async () => {
    const plain = await startServer(backend, { telemetry: false });
    closers.push(plain.close);
    const key = newKey();
    expect((await plain.post('pay', key, { amount: 8 })).status).toBe(200);
    expect((await plain.post('pay', key, { amount: 8 })).status).toBe(200);
    expect(spans.getFinishedSpans()).toEqual([]);
    expect(await takeMetrics()).toEqual({});
  });
});
