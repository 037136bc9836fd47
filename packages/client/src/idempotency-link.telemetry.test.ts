import * as otel from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createTRPCUntypedClient } from '@trpc/client';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { type Answer, ok, scriptedLink } from './__tests__/scripted-link.js';
import { idempotencyLink } from './idempotency-link.js';

const spans = new InMemorySpanExporter();

beforeAll(() => {
  otel.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
});
afterAll(() => otel.trace.disable());
beforeEach(() => spans.reset());

function client(script: (attempt: number) => Answer, { telemetry }: { telemetry?: typeof otel } = { telemetry: otel }) {
  const server = scriptedLink(script);
  return createTRPCUntypedClient({
    links: [
      idempotencyLink<any>({ procedures: ['pay'], budget: false, baseDelayMs: 1, maxDelayMs: 1, telemetry }),
      server.link,
    ],
  });
}

const eventsOf = (span: { events: { name: string; attributes?: Record<string, unknown> }[] }) =>
  span.events.map((e) => ({ name: e.name, ...e.attributes }));

test('a span per call: an event per attempt with its delay and error, then the attempts and replay flag', async () => {
  const answers: Answer[] = [
    'network',
    { status: 409, reason: 'in_progress', retryAfterMs: 5 },
    { data: 'paid', headers: { 'idempotent-replayed': 'true' } },
  ];
  expect(await client((n) => answers[n - 1] as Answer).mutation('pay', { amount: 1 })).toBe('paid');
  const [span, ...others] = spans.getFinishedSpans();
  expect(others).toEqual([]);
  expect(span?.name).toBe('trpc_idempotency.client.call');
  expect(span?.attributes).toEqual({
    'trpc_idempotency.path': 'pay',
    'trpc_idempotency.attempts': 3,
    'trpc_idempotency.replayed': true,
  });
  expect(span?.status.code).toBe(otel.SpanStatusCode.UNSET);
  const [first, second, third] = eventsOf(span as never);
  expect(first).toMatchObject({
    name: 'trpc_idempotency.attempt',
    'trpc_idempotency.attempt': 1,
    'trpc_idempotency.delay_ms': 0,
    'error.type': 'TypeError',
  });
  expect(second).toMatchObject({
    'trpc_idempotency.attempt': 2,
    'error.type': 'in_progress',
    'http.response.status_code': 409,
  });
  expect(third).toEqual({
    name: 'trpc_idempotency.attempt',
    'trpc_idempotency.attempt': 3,
    'trpc_idempotency.delay_ms': 5,
  });
});

test('a call that fails ends its span with error.type and the status ERROR; the key is in no attribute', async () => {
  const key = 'form-key-telemetry-1';
  const call = client(() => ({ status: 422, reason: 'payload_mismatch', keyAnswer: true })).mutation(
    'pay',
    {},
    { context: { idempotencyKey: key } },
  );
  await expect(call).rejects.toThrow();
  const [span] = spans.getFinishedSpans();
  expect(span?.attributes).toMatchObject({
    'trpc_idempotency.attempts': 1,
    'trpc_idempotency.replayed': false,
    'error.type': 'payload_mismatch',
    'http.response.status_code': 422,
  });
  expect(span?.status.code).toBe(otel.SpanStatusCode.ERROR);
  expect(JSON.stringify([span?.attributes, span?.events])).not.toContain(key);
});

test('without the telemetry option no span is made, though an SDK is registered', async () => {
  expect(await client(() => ok('paid'), {}).mutation('pay', {})).toBe('paid');
  expect(spans.getFinishedSpans()).toEqual([]);
});
