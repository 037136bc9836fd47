/**
 * What writing a result into the `response` column costs per call, in process: `npx tsx src/stored-response-cost.ts`
 * (after `npm run build`). The default serializer plus the JSON envelope (`encodeStoredResponse`), on results the
 * size of a mutation's answer, and the payment through superjson (`serializer: superjson`, which pays a read-back
 * check). Not a test: CPU only, no database.
 *
 * `STORED_RESPONSE_BEFORE=<another build's packages/server/dist>` times that build's encoder on the same results,
 * interleaved with this one's (which runs first alternates by round): an A/B of two builds in one run, as the
 * median of before ÷ this over rounds with its spread.
 */

import superjson from 'superjson';
import { defaultSerializer, type Serializer } from '../../packages/server/dist/serialize/serializer.js';
import { encodeStoredResponse } from '../../packages/server/dist/serialize/stored-response.js';

type Encode = typeof encodeStoredResponse;

const row = (i: number) => ({
  id: `pay_${i}`,
  amount: 1000 + i,
  currency: 'eur',
  status: 'succeeded',
  createdAt: new Date(1_700_000_000_000 + i),
  metadata: { order: `ord_${i}`, note: null },
});
const RESULTS: Record<string, [unknown, Serializer | undefined]> = {
  'payment (6 fields)': [row(1), undefined],
  'list of 20 payments': [Array.from({ length: 20 }, (_, i) => row(i)), undefined],
  'strings only': [{ ok: true, id: 'ord_1', message: 'accepted' }, undefined],
  'payment, superjson': [row(1), superjson],
};
const CALLS = Number(process.env.CALLS ?? 100_000);
const ROUNDS = Number(process.env.ROUNDS ?? 9);

function nsPerCall(encode: Encode, serializer: Serializer, data: unknown): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i++) encode({ ok: true, data }, serializer);
  return Number(process.hrtime.bigint() - start) / CALLS;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const beforeDist = process.env.STORED_RESPONSE_BEFORE;
const before = beforeDist
  ? {
      encode: ((await import(`${beforeDist}/serialize/stored-response.js`)) as { encodeStoredResponse: Encode })
        .encodeStoredResponse,
      serializer: ((await import(`${beforeDist}/serialize/serializer.js`)) as { defaultSerializer: Serializer })
        .defaultSerializer,
    }
  : undefined;

console.log(
  before
    ? 'result                  this build ns/call   before ns/call   before ÷ this, median (min–max)'
    : 'result                  ns/call',
);
for (const [name, [data, serializer]] of Object.entries(RESULTS)) {
  const thisNs: number[] = [];
  const beforeNs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    if (before && round % 2) beforeNs.push(nsPerCall(before.encode, serializer ?? before.serializer, data));
    thisNs.push(nsPerCall(encodeStoredResponse, serializer ?? defaultSerializer, data));
    if (before && !(round % 2)) beforeNs.push(nsPerCall(before.encode, serializer ?? before.serializer, data));
  }
  let line = `${name.padEnd(23)} ${median(thisNs).toFixed(0).padStart(18)}`;
  if (before) {
    const ratios = beforeNs.map((b, i) => b / thisNs[i]!);
    const spread = `${median(ratios).toFixed(2)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`;
    line += `   ${median(beforeNs).toFixed(0).padStart(14)}   ${spread}`;
  }
  console.log(line);
}
