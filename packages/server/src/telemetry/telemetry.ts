import type { IdempotencyEventType } from '../events.js';
import type { IdempotencyMode } from '../options.js';
import type { DialectName } from '../store/dialects/dialect.js';
import { METRIC } from './names.js';
import type { OpenTelemetryApi, OtelCounter, OtelHistogram, OtelTracer } from './otel-api.js';

const SCOPE_NAME = '@trpc-idempotency/server';

/** The semantic conventions' `db.system.name` of each dialect (MariaDB is told apart from MySQL by neither). */
const DB_SYSTEM: Record<DialectName, string> = { postgres: 'postgresql', mysql: 'mysql', sqlite: 'sqlite' };

/** Buckets of the claim-latency histogram, in seconds: the conventions' advice for request durations. */
const CLAIM_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface Instruments {
  /** Per event type; `waited` has no counter of its own (its span and `waited_ms` say it). */
  outcomes: Partial<Record<IdempotencyEventType, OtelCounter>>;
  stepExecutions: OtelCounter;
  stepReplays: OtelCounter;
  claimDuration: OtelHistogram;
}

/**
 * The `telemetry` option at work: one per `createIdempotency`. Absent, nothing of this folder runs: the middleware
 * is not wrapped and every hook in the modes is an optional call on `undefined`.
 */
export class Telemetry {
  readonly api: OpenTelemetryApi;
  readonly tracer: OtelTracer;
  readonly mode: IdempotencyMode;
  readonly dbSystem: string;
  #instruments: Instruments | undefined;

  constructor(api: OpenTelemetryApi, mode: IdempotencyMode, dialect: DialectName) {
    this.api = api;
    // A tracer of the global API follows whichever provider is registered, even later.
    this.tracer = api.trace.getTracer(SCOPE_NAME);
    this.mode = mode;
    this.dbSystem = DB_SYSTEM[dialect];
  }

  /** Made at the first call, not at `createIdempotency`: a meter taken before the SDK started would stay a no-op. */
  get instruments(): Instruments {
    if (this.#instruments) return this.#instruments;
    const meter = this.api.metrics.getMeter(SCOPE_NAME);
    const counter = (name: string, description: string, unit = '{call}') =>
      meter.createCounter(name, { description, unit });
    this.#instruments = {
      outcomes: {
        executed: counter(METRIC.executions, 'Calls whose handler ran and whose outcome was committed'),
        replayed: counter(METRIC.replays, 'Calls answered with a stored outcome, without running the handler'),
        conflict: counter(METRIC.conflicts, 'Calls answered 409 in_progress: the original still ran after wait'),
        mismatch: counter(
          METRIC.mismatches,
          'Calls answered 422 payload_mismatch: the key was used with another input',
        ),
        taken_over: counter(METRIC.takeovers, "Lease mode: calls that took over a dead holder's claim"),
        released: counter(METRIC.releases, 'Calls whose failure was not stored: the key was freed for a retry'),
      },
      stepExecutions: counter(METRIC.stepExecutions, 'Durable steps run (their function called)', '{step}'),
      stepReplays: counter(METRIC.stepReplays, 'Durable steps replayed from their record, not run', '{step}'),
      claimDuration: meter.createHistogram(METRIC.claimDuration, {
        description: 'Time of one claim of a key (in transaction mode it includes blocking on an in-flight original)',
        unit: 's',
        advice: { explicitBucketBoundaries: CLAIM_BUCKETS },
      }),
    };
    return this.#instruments;
  }
}
