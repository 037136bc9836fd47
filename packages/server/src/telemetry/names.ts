/*
 * Span, attribute and metric names (docs/telemetry.md lists them). OpenTelemetry's semantic conventions name the
 * database (`db.system.name`) and the error (`error.type`); the rest has no convention and lives in the library's
 * own namespace, `trpc_idempotency.`, so it never collides with one added later.
 */

export const SPAN = {
  call: 'trpc_idempotency.call',
  claim: 'trpc_idempotency.claim',
  wait: 'trpc_idempotency.wait',
  handler: 'trpc_idempotency.handler',
  step: 'trpc_idempotency.step',
  complete: 'trpc_idempotency.complete',
  replay: 'trpc_idempotency.replay',
} as const;

export type ChildSpanName = Exclude<(typeof SPAN)[keyof typeof SPAN], typeof SPAN.call>;

export const ATTR = {
  mode: 'trpc_idempotency.mode',
  /** The semantic conventions' database attribute: `postgresql`, `mysql` or `sqlite`. */
  dbSystem: 'db.system.name',
  path: 'trpc_idempotency.path',
  outcome: 'trpc_idempotency.outcome',
  waitedMs: 'trpc_idempotency.waited_ms',
  takeover: 'trpc_idempotency.takeover',
  stepName: 'trpc_idempotency.step.name',
  stepIndex: 'trpc_idempotency.step.index',
  stepReplayed: 'trpc_idempotency.step.replayed',
  /** The semantic conventions' error attribute: the idempotency reason, the tRPC code, or the error's class. */
  errorType: 'error.type',
} as const;

export const METRIC = {
  executions: 'trpc_idempotency.executions',
  replays: 'trpc_idempotency.replays',
  conflicts: 'trpc_idempotency.conflicts',
  mismatches: 'trpc_idempotency.mismatches',
  takeovers: 'trpc_idempotency.takeovers',
  releases: 'trpc_idempotency.releases',
  stepExecutions: 'trpc_idempotency.step.executions',
  stepReplays: 'trpc_idempotency.step.replays',
  claimDuration: 'trpc_idempotency.claim.duration',
} as const;

/** `SpanStatusCode.ERROR`. */
export const STATUS_ERROR = 2;
