import { type Spread, spread } from '../load/stats.ts';
import type { BenchResults } from '../results.ts';

/** One of issue 29's goals: a ratio measured round by round, its target, and whether the median meets it. */
export interface Goal {
  goal: string;
  /** What is divided by what. */
  ratio: string;
  ratioSpread: Spread | undefined;
  target: number;
  met: boolean | undefined;
  /** A build-against-build row: met unless slower than the earlier build beyond the run's spread. */
  notSlower?: boolean;
}

/** The configuration the README recommends: transaction mode with the raw `pg` pool. */
const OURS = 'ours-tx+pool';
const OURS_GENERAL = 'ours-tx';
const PEERS = ['powertools', 'node-idempotency'];

/** Per-round a ÷ b of two contenders measured in the same interleaved rounds (round i against round i). */
function perRound(a: number[] | undefined, b: number[] | undefined): Spread | undefined {
  if (!a?.length || !b?.length) return undefined;
  return spread(a.map((x, i) => x / (b[i] ?? Number.NaN)));
}

function goal(name: string, ratio: string, s: Spread | undefined, target: number): Goal {
  const met = s && Number.isFinite(s.median) ? s.median >= target : undefined;
  return { goal: name, ratio, ratioSpread: s, target, met };
}

/**
 * Against the earlier build, a cell fails only when it is slower beyond the run's spread: slower in every round
 * (the per-round ratio's maximum under 1), as a median under 1 with rounds on both sides is the run's noise.
 */
function notSlower(name: string, ratio: string, s: Spread | undefined): Goal {
  const met = s && Number.isFinite(s.max) ? s.max >= 1 : undefined;
  return { goal: name, ratio, ratioSpread: s, target: 1, met, notSlower: true };
}

function replayOf(r: BenchResults, name: string) {
  return r.replay?.find((x) => x.contender === name);
}

/** The fastest Redis-backed peer by median replay rate (the ratio is then taken round by round). */
function fastestPeer(r: BenchResults) {
  const peers = (r.replay ?? []).filter((x) => PEERS.includes(x.contender) && x.roundRps);
  return [...peers].sort((a, b) => b.rps - a.rps)[0];
}

/** Issue 29's goals, exactly: each ratio of two cells of the same interleaved run. */
export function checkGoals(r: BenchResults): Goal[] {
  const rps = (name: string, handler: string) =>
    r.overhead?.find((o) => o.contender === name && o.handler === handler)?.rounds.map((x) => x.rps);
  const goals: Goal[] = [];
  // No cell slower than the build before the hardening (BENCH_BEFORE_DIST), beyond the run's spread. That build
  // (051ce96) speaks Postgres only, so the dialect cells have no earlier build to compare with.
  for (const name of [OURS, OURS_GENERAL]) {
    const before = `${name}-before`;
    for (const handler of ['light', 'payment']) {
      if (!rps(before, handler)) continue;
      goals.push(
        notSlower(
          `not slower than before (${name}, ${handler})`,
          `${name} ÷ ${before} (${handler})`,
          perRound(rps(name, handler), rps(before, handler)),
        ),
      );
    }
    if (replayOf(r, before)) {
      goals.push(
        notSlower(
          `not slower than before (${name}, replay)`,
          `${name} ÷ ${before} (replay)`,
          perRound(replayOf(r, name)?.roundRps, replayOf(r, before)?.roundRps),
        ),
      );
    }
  }
  goals.push(
    goal(
      'light',
      `${OURS} ÷ classic-kysely (light)`,
      perRound(rps(OURS, 'light'), rps('classic-kysely', 'light')),
      1.0,
    ),
  );
  goals.push(
    goal('payment', `${OURS} ÷ plain (payment)`, perRound(rps(OURS, 'payment'), rps('plain', 'payment')), 0.85),
  );
  const fastest = fastestPeer(r);
  goals.push(
    goal(
      'cached replay',
      `${OURS} ÷ ${fastest?.contender ?? 'fastest peer'} (replay)`,
      perRound(replayOf(r, OURS)?.roundRps, fastest?.roundRps),
      1.0,
    ),
  );
  for (const row of (r.dialects ?? []).filter(
    (d) => d.handler === 'payment' && d.via === 'HTTP' && /^(MariaDB|SQLite)/.test(d.dialect),
  )) {
    goals.push(
      goal(`${row.dialect.replace(/ \(.*/, '')} payment, HTTP`, 'ours ÷ plain, same database', row.ratio, 0.75),
    );
  }
  return goals;
}

/**
 * Not goals of issue 29, kept for comparison with the earlier runs: the ceiling of a replay inside a middleware,
 * the general path against the fast path, and the dialect cells in process and on libSQL.
 */
export function otherRatios(r: BenchResults): Goal[] {
  const rps = (name: string, handler: string) =>
    r.overhead?.find((o) => o.contender === name && o.handler === handler)?.rounds.map((x) => x.rps);
  const rows: Goal[] = [];
  const fastest = fastestPeer(r);
  const floor = replayOf(r, 'replay-floor');
  if (floor) {
    // A middleware that only looks the key up in a Map: how much of the replay goal any middleware can reach here.
    rows.push(
      goal(
        'ceiling: a Map lookup in a middleware',
        `replay-floor ÷ ${fastest?.contender ?? 'fastest peer'} (replay)`,
        perRound(floor.roundRps, fastest?.roundRps),
        1.0,
      ),
      goal(
        'ours against that ceiling',
        `${OURS} ÷ replay-floor (replay)`,
        perRound(replayOf(r, OURS)?.roundRps, floor.roundRps),
        0.9,
      ),
    );
  }
  const burst = replayOf(r, 'replay-floor-yield');
  if (burst) {
    // The same lookup after one turn of the event loop (answers in bursts, as a peer's do after its store's reply).
    rows.push(
      goal(
        'the ceiling, answering in bursts',
        `replay-floor-yield ÷ ${fastest?.contender ?? 'fastest peer'} (replay)`,
        perRound(burst.roundRps, fastest?.roundRps),
        1.0,
      ),
    );
  }
  for (const handler of ['light', 'payment']) {
    rows.push(
      goal(
        `general path (${handler})`,
        `${OURS_GENERAL} ÷ ${OURS} (${handler})`,
        perRound(rps(OURS_GENERAL, handler), rps(OURS, handler)),
        0.9,
      ),
    );
  }
  for (const row of (r.dialects ?? []).filter((d) => d.handler === 'payment' && !d.dialect.startsWith('Postgres'))) {
    const http = row.via === 'HTTP';
    if (http && /^(MariaDB|SQLite)/.test(row.dialect)) continue;
    rows.push(
      goal(
        `${row.dialect.replace(/ \(.*/, '')} payment${http ? ', HTTP' : ', in process'}`,
        'ours ÷ plain, same database',
        row.ratio,
        http ? 0.75 : 0.9,
      ),
    );
  }
  return rows;
}
