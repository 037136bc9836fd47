import { round1, round2 } from '../load/stats.ts';
import type { BenchResults } from '../results.ts';
import { formatRatio } from '../scenarios/overhead.ts';
import { checkGoals, type Goal, otherRatios } from './goals.ts';

/** A markdown table (also readable in a terminal). */
export function table(head: string[], rows: (string | number)[][]): string[] {
  const cells = rows.map((r) => r.map(String));
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]?.length ?? 0)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.map(line)];
}

const ms = (n: number) => (Number.isFinite(n) ? round2(n).toFixed(2) : '–');
const num = (n: number) => (Number.isFinite(n) ? String(round1(n)) : '–');
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');
/** Also '–' for a figure older results lack (undefined). */
const int = (n: number | undefined) => (n !== undefined && Number.isFinite(n) ? String(Math.round(n)) : '–');

export function overheadTable(results: BenchResults, handler: 'light' | 'payment'): string[] {
  const rows = (results.overhead ?? []).filter((r) => r.handler === handler);
  return table(
    [
      'contender',
      'req/s',
      'p50 ms',
      'p99 ms',
      'ratio to plain (min–max)',
      'server CPU µs/req',
      'Postgres CPU µs/req',
      'load gen CPU µs/req',
      'SQL/req',
      'non-200',
    ],
    rows.map((r) => [
      r.contender,
      Math.round(r.rps),
      ms(r.p50),
      ms(r.p99),
      formatRatio(r.ratio),
      int(r.cpuMicros),
      int(r.pgCpuMicros),
      int(r.loadCpuMicros),
      num(r.sqlPerRequest),
      r.non200,
    ]),
  );
}

export function replayTable(results: BenchResults): string[] {
  return table(
    [
      'contender',
      'req/s',
      'p50 ms',
      'p99 ms',
      '÷ plain light',
      '÷ plain payment',
      'server CPU µs/req',
      'load gen CPU µs/req',
      'non-200',
    ],
    (results.replay ?? []).map((r) => [
      r.contender,
      Math.round(r.rps),
      ms(r.p50),
      ms(r.p99),
      formatRatio(r.ratioLight),
      formatRatio(r.ratioPayment),
      int(r.cpuMicros),
      int(r.loadCpuMicros),
      r.non200,
    ]),
  );
}

export function roundTripTable(results: BenchResults): string[] {
  return table(
    [
      'contender',
      'SQL light',
      'SQL payment',
      'SQL replay',
      'Redis first',
      'Redis replay',
      'server CPU µs light',
      'payment',
      'replay',
    ],
    (results.roundTrips ?? []).map((r) => [
      r.contender,
      num(r.sqlLight),
      num(r.sqlPayment),
      num(r.sqlReplay),
      num(r.redisLight),
      num(r.redisReplay),
      Number.isFinite(r.cpuLight) ? Math.round(r.cpuLight) : '–',
      Number.isFinite(r.cpuPayment) ? Math.round(r.cpuPayment) : '–',
      Number.isFinite(r.cpuReplay) ? Math.round(r.cpuReplay) : '–',
    ]),
  );
}

export function stormTable(results: BenchResults): string[] {
  return table(
    ['contender', 'requests', 'executions', 'responses by status', 'all answered ms'],
    (results.storm ?? []).map((r) => [
      r.contender,
      r.requests,
      r.executions,
      Object.entries(r.statuses)
        .map(([k, v]) => `${k}: ${v}`)
        .join(', '),
      Math.round(r.allAnsweredMs),
    ]),
  );
}

export function printTables(results: BenchResults): string[] {
  const out: string[] = [];
  if (results.ledger) out.push('', '## Per-call cost ledger', ...ledgerTable(results));
  if (results.roundTrips) out.push('', '## Round trips per request', ...roundTripTable(results));
  if (results.overhead) {
    out.push('', '## Overhead, light handler', ...overheadTable(results, 'light'));
    out.push('', '## Overhead, payment handler', ...overheadTable(results, 'payment'));
  }
  if (results.replay) out.push('', '## Replay', ...replayTable(results));
  if (results.storm) out.push('', '## Duplicate storm', ...stormTable(results));
  if (results.scaling) out.push('', '## Scaling with table size', ...scalingTable(results));
  if (results.purge) out.push('', '## Purge under load', ...purgeTable(results));
  if (results.dialects) out.push('', '## Dialects', ...dialectsTable(results));
  if (results.client) {
    out.push('', '## Client link overhead', ...linkTable(results));
    out.push('', '## Retry amplification in a full outage', ...outageTable(results));
  }
  return out;
}

export function scalingTable(results: BenchResults): string[] {
  return table(
    [
      'stored rows',
      'load s',
      'table MiB',
      'claim req/s',
      'claim p50 ms',
      'claim p99 ms',
      'claim p50 ÷ smallest',
      'replay p50 ms',
      'replay p99 ms',
      'replay p50 ÷ smallest',
    ],
    (results.scaling ?? []).map((r) => [
      r.rows.toExponential(0).replace('e+', 'e'),
      num(r.loadSeconds),
      Math.round(r.tableMiB),
      Math.round(r.claim.rps),
      ms(r.claim.p50),
      ms(r.claim.p99),
      `${ms(r.claimP50VsSmallest)}×`,
      ms(r.replay.p50),
      ms(r.replay.p99),
      `${ms(r.replayP50VsSmallest)}×`,
    ]),
  );
}

export function purgeTable(results: BenchResults): string[] {
  const p = results.purge;
  if (!p) return [];
  return table(
    ['expired rows', 'load s', 'removed', 'purge s', 'rows/s', 'traffic', 'req/s', 'p50 ms', 'p99 ms'],
    [
      [
        p.expiredRows,
        num(p.loadSeconds),
        p.removed,
        num(p.purgeSeconds),
        Math.round(p.removed / p.purgeSeconds),
        'before',
        Math.round(p.before.rps),
        ms(p.before.p50),
        ms(p.before.p99),
      ],
      [
        '',
        '',
        '',
        '',
        '',
        `during (non-200: ${p.duringNon200})`,
        Math.round(p.during.rps),
        ms(p.during.p50),
        ms(p.during.p99),
      ],
    ],
  );
}

export function linkTable(results: BenchResults): string[] {
  return table(
    ['client', 'ops/s', 'p50 ms', 'p99 ms', 'client CPU µs/op', 'ratio to httpLink'],
    (results.client?.overhead ?? []).map((r) => [
      r.client,
      Math.round(r.opsPerSecond),
      ms(r.p50),
      ms(r.p99),
      Math.round(r.cpuMicrosPerOp),
      formatRatio(r.ratio),
    ]),
  );
}

export function outageTable(results: BenchResults): string[] {
  return table(
    ['retry budget', 'logical calls', 'HTTP requests', 'requests per call', 'seconds'],
    (results.client?.outage ?? []).map((r) => [r.budget, r.calls, r.httpRequests, ms(r.amplification), num(r.seconds)]),
  );
}

/**
 * On a CPU-bound machine req/s ≈ 1 / (CPU per request), so plain's server + Postgres CPU divided by a
 * contender's predicts its ratio; the closer to the measured ratio, the more of the gap that CPU explains.
 */
export function costModelTable(results: BenchResults, handler: 'light' | 'payment'): string[] {
  const rows = (results.overhead ?? []).filter((r) => r.handler === handler);
  const plain = rows.find((r) => r.contender === 'plain');
  if (!plain || !Number.isFinite(plain.cpuMicros) || !Number.isFinite(plain.pgCpuMicros)) return [];
  // Results from before the load generator's CPU was measured leave it out of the total.
  const loadCpu = (r: (typeof rows)[number]) => (Number.isFinite(r.loadCpuMicros) ? r.loadCpuMicros : 0);
  const plainTotal = plain.cpuMicros + plain.pgCpuMicros + loadCpu(plain);
  return table(
    [
      'contender',
      'server µs',
      'Postgres µs',
      'load gen µs',
      'total µs',
      'extra vs plain µs',
      'predicted ratio',
      'measured ratio',
    ],
    rows.map((r) => {
      const total = r.cpuMicros + r.pgCpuMicros + loadCpu(r);
      return [
        r.contender,
        Math.round(r.cpuMicros),
        Math.round(r.pgCpuMicros),
        int(r.loadCpuMicros),
        Math.round(total),
        Math.round(total - plainTotal),
        `${(plainTotal / total).toFixed(2)}×`,
        `${r.ratio.median.toFixed(2)}×`,
      ];
    }),
  );
}

export function goalsTable(results: BenchResults): string[] {
  return ratioRows(checkGoals(results));
}

/** The ratios kept from issue 15's goals for comparison with earlier runs (not issue 29's goals). */
export function otherRatiosTable(results: BenchResults): string[] {
  return ratioRows(otherRatios(results));
}

function ratioRows(goals: Goal[]): string[] {
  return table(
    ['goal', 'ratio', 'median (min–max)', 'target', 'met'],
    goals.map((g) => [
      g.goal,
      g.ratio,
      g.ratioSpread ? formatRatio(g.ratioSpread) : '–',
      g.notSlower ? 'not < 1 in every round' : `≥ ${g.target}`,
      g.met === undefined ? '–' : g.met ? 'yes' : 'no',
    ]),
  );
}

/** The per-call ledger: one row per contender and call kind. */
export function ledgerTable(results: BenchResults): string[] {
  return table(
    [
      'contender',
      'call',
      'round trips',
      'statements',
      'Redis cmds',
      'transactions',
      'key rows ins / upd (HOT) / del',
      'WAL B (this DB)',
      'WAL B (server)',
      'Postgres CPU µs',
      'Node CPU µs',
    ],
    (results.ledger ?? []).map((r) => [
      r.contender,
      r.call,
      f2(r.roundTrips),
      f2(r.statements),
      f2(r.redis),
      f2(r.transactions),
      `${f2(r.keyInserts)} / ${f2(r.keyUpdates)} (${f2(r.keyHotUpdates)}) / ${f2(r.keyDeletes)}`,
      int(r.walBytes),
      int(r.walBytesCluster),
      int(r.serverCpuMicros),
      int(r.clientCpuMicros),
    ]),
  );
}

export function dialectsTable(results: BenchResults): string[] {
  return table(
    ['dialect', 'handler', 'via', 'plain calls/s', 'ours calls/s', 'ours ÷ plain (min–max)', 'non-200'],
    (results.dialects ?? []).map((r) => [
      r.dialect,
      r.handler,
      r.via === 'HTTP' ? `HTTP, ${r.calls} connections` : 'in process',
      int(r.plain),
      int(r.ours),
      formatRatio(r.ratio),
      r.non200 ?? '–',
    ]),
  );
}
