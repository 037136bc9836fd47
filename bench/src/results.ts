import type { BenchParams } from './bench-env.ts';
import type { ContenderSpec } from './contenders/contender-spec.ts';
import type { MachineFacts } from './report/machine.ts';
import type { ClientLinkResult } from './scenarios/client-link.ts';
import type { DialectRow } from './scenarios/dialects.ts';
import type { LedgerRow } from './scenarios/ledger.ts';
import type { OverheadRow } from './scenarios/overhead.ts';
import type { PurgeResult } from './scenarios/purge.ts';
import type { ReplayRow } from './scenarios/replay.ts';
import type { RoundTripRow } from './scenarios/round-trips.ts';
import type { ScalingRow } from './scenarios/scaling.ts';
import type { StormRow } from './scenarios/storm.ts';

/** bench/results/latest.json: everything one run measured. */
export interface BenchResults {
  command: string;
  params: BenchParams;
  machine: MachineFacts;
  contenders: ContenderSpec[];
  elapsedSeconds?: number;
  roundTrips?: RoundTripRow[];
  overhead?: OverheadRow[];
  replay?: ReplayRow[];
  storm?: StormRow[];
  scaling?: ScalingRow[];
  purge?: PurgeResult;
  client?: ClientLinkResult;
  ledger?: LedgerRow[];
  dialects?: DialectRow[];
}
