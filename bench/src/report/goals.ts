import { type Spread, spread } from '../load/stats.ts';
import type { BenchResults } from '../results.ts';

/** One of issue 15's goals: a ratio measured round by round, its target, and whether the median meets it. */
export interface Goal {
  goal: string;
  /** What is divided by what. */
  ratio: string;
  ratioSpread: Spread | undefined;
  target: number;
  met: boolean | undefined;
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

export function checkGoals(r: BenchResults): Goal[] {
  const rps = (name: string, handler: string) =>
    r.overhead?.find((o) => o.contender === name && o.handler === handler)?.rounds.map((x) => x.rps);
  const goals: Goal[] = [];
  goals.push(
    goal('1. payment', `${OURS} ÷ plain (payment)`, perRound(rps(OURS, 'payment'), rps('plain', 'payment')), 0.95),
  );
  goals.push(
    goal(
      '2. light',
      `${OURS} ÷ classic-kysely (light)`,
      perRound(rps(OURS, 'light'), rps('classic-kysely', 'light')),
      1.2,
    ),
  );
  // The fastest peer is the one with the higher median replay rate; the ratio is then taken round by round.
  const peers = (r.replay ?? []).filter((x) => PEERS.includes(x.contender) && x.roundRps);
  const fastest = peers.sort((a, b) => b.rps - a.rps)[0];
  const oursReplay = r.replay?.find((x) => x.contender === OURS);
  goals.push(
    goal(
      '3. cached replay',
      `${OURS} ÷ ${fastest?.contender ?? 'fastest peer'} (replay)`,
      perRound(oursReplay?.roundRps, fastest?.roundRps),
      1.2,
    ),
  );
  // Not a goal of ours: the same ratio for a middleware that only looks the key up in a Map. Ours cannot pass it, so
  // it shows how much of goal 3 any replay inside a tRPC middleware can reach on this machine.
  const floor = r.replay?.find((x) => x.contender === 'replay-floor');
  if (floor) {
    goals.push(
      goal(
        '3. ceiling: a Map lookup in a middleware',
        `replay-floor ÷ ${fastest?.contender ?? 'fastest peer'} (replay)`,
        perRound(floor.roundRps, fastest?.roundRps),
        1.2,
      ),
    );
    goals.push(
      goal(
        '3. ours against that ceiling',
        `${OURS} ÷ replay-floor (replay)`,
        perRound(oursReplay?.roundRps, floor.roundRps),
        0.9,
      ),
    );
  }
  for (const handler of ['light', 'payment']) {
    goals.push(
      goal(
        `4. general path (${handler})`,
        `${OURS_GENERAL} ÷ ${OURS} (${handler})`,
        perRound(rps(OURS_GENERAL, handler), rps(OURS, handler)),
        0.9,
      ),
    );
  }
  // In process (the floor: the database and the middleware alone) and, where measured, over HTTP.
  for (const row of (r.dialects ?? []).filter((d) => d.handler === 'payment' && !d.dialect.startsWith('Postgres'))) {
    const http = row.via === 'HTTP';
    goals.push(
      goal(
        `4. ${row.dialect} (payment${http ? ', HTTP' : ''})`,
        `ours ÷ plain, same database, ${http ? 'over HTTP' : 'in process'}`,
        row.ratio,
        0.9,
      ),
    );
  }
  return goals;
}
