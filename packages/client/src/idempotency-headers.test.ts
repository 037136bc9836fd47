import type { Operation } from '@trpc/client';
import { describe, expect, test } from 'vitest';
import { idempotencyHeaders } from './idempotency-headers.js';
import { wasReplayed } from './internals/response-meta.js';

const op = (id: number, idempotencyKey?: string): Operation => ({
  id,
  type: 'mutation',
  path: 'pay',
  input: {},
  context: idempotencyKey === undefined ? {} : { idempotencyKey },
  signal: null,
});

const replayedHeader = (value: string) => ({
  response: new Response(null, { headers: { 'idempotent-replayed': value } }),
});

describe('idempotencyHeaders', () => {
  test('one operation sends its key as an SF String in Idempotency-Key', () => {
    expect(idempotencyHeaders({ op: op(1, 'k"1') })).toEqual({ 'Idempotency-Key': '"k\\"1"' });
  });

  test('a batch of one is sent like a single operation', () => {
    expect(idempotencyHeaders({ opList: [op(1, 'k1')] })).toEqual({ 'Idempotency-Key': '"k1"' });
  });

  test('a batch sends Idempotency-Keys indexed by position, skipping unkeyed operations', () => {
    expect(idempotencyHeaders({ opList: [op(1, 'k1'), op(2), op(3, 'k2')] })).toEqual({
      'Idempotency-Keys': 'b0="k1", b2="k2"',
    });
  });

  test('a query or subscription sends no key, even one its context holds', () => {
    const query: Operation = { ...op(1, 'k1'), type: 'query' };
    const subscription: Operation = { ...op(2, 'k2'), type: 'subscription' };
    expect(idempotencyHeaders({ op: query })).toEqual({});
    expect(idempotencyHeaders({ opList: [query, op(3, 'k3'), subscription] })).toEqual({
      'Idempotency-Keys': 'b1="k3"',
    });
  });

  test('operations without a key add no header', () => {
    expect(idempotencyHeaders({ op: op(1) })).toEqual({});
    expect(idempotencyHeaders({ opList: [op(1), op(2)] })).toEqual({});
  });

  test('with() merges the app headers, sync or async, object or Headers, and the key wins', async () => {
    const auth = idempotencyHeaders.with(async ({ opList }: { opList: readonly Operation[] }) => ({
      authorization: `Bearer ${opList.length}`,
      'idempotency-keys': 'stale',
    }));
    expect(await auth({ opList: [op(1, 'a'), op(2, 'b')] })).toEqual({
      authorization: 'Bearer 2',
      'Idempotency-Keys': 'b0="a", b1="b"',
    });
    const fromHeaders = idempotencyHeaders.with(new Headers({ 'x-tenant': 't1' }));
    expect(await fromHeaders({ op: op(1, 'k') })).toEqual({ 'x-tenant': 't1', 'Idempotency-Key': '"k"' });
    const fromRecord = idempotencyHeaders.with({ accept: ['a', 'b'], skipped: undefined });
    expect(await fromRecord({ op: op(1) })).toEqual({ accept: 'a, b' });
  });

  test('the batch position it records lets the link read a replayed batch member', () => {
    const ops = [op(1, 'k1'), op(2, 'k2'), op(3, 'k3')];
    idempotencyHeaders({ opList: ops });
    const meta = replayedHeader('b0, b2');
    expect(ops.map((o) => wasReplayed(meta, o.context))).toEqual([true, false, true]);
    expect(wasReplayed(replayedHeader('true'), ops[1]!.context)).toBe(true);
    expect(wasReplayed(replayedHeader('b9'), {})).toBe(false);
  });
});
