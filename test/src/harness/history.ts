/**
 * The history checker: what every chaos, fault and integration run recorded, judged by one set of rules.
 *
 * A run records plain data — each logical call (scope, key, input, every attempt and its answer), each handler
 * execution the servers reported, each committed effect (a ledger row written through `ctx.idempotency.db`) and,
 * once the run has settled, anything left in progress. {@link checkHistory} then asserts, per key:
 *
 * - `executed-twice`: at most one handler execution that no injected fault excused (a SIGKILLed process, a
 *   terminated connection, a paused database, a callback made to throw). In transaction mode this is the promise
 *   itself; in lease mode a second execution is only legitimate after the holder was cut off, so a takeover of a
 *   live, connected holder shows here.
 * - `effect-twice`: at most one committed effect (ledger rows keyed by `ctx.idempotency.key`), in both modes.
 * - `different-answers`: every answer given for the key is the same outcome (the same result, or the same stored
 *   error). A 409, a 503, a 5xx or a network failure is no answer, not a different one.
 * - `cross-scope`: no answer carries another scope, or comes from an execution of another scope or key.
 * - `foreign-answer`: a result names an execution that did not commit (another execution's effect committed, or
 *   none did where every result commits one) or that nobody recorded.
 * - `one-outcome-two-inputs`: a result was given to calls whose inputs differ (a fingerprint collision).
 * - `stuck`: nothing is left in progress once the run has settled.
 *
 * And the client's view, for runs that record it (each call's `reported` verdict and the user `action` it serves):
 *
 * - `failed-but-committed`: no call is reported definitively failed (the key spent, the user free to pay again
 *   under a new key) while its key committed an effect: the answer that ended it was not the key's.
 * - `action-twice`: one user action (its calls, whatever their keys) commits at most one effect.
 *
 * Nothing here knows SQL, HTTP or a dialect: the recorders in history-recording.ts and history-database.ts fill it.
 */

export type HistoryMode = 'transaction' | 'lease';

/** What the server said about one outcome: enough to tell two outcomes apart and to trace where one came from. */
export interface Answer {
  /** Equal strings for equal outcomes: the result's canonical JSON, or the stored error's code and message. */
  outcome: string;
  /** The scope the answer says it was produced for, when it carries one. */
  scope?: string;
  /** The execution that produced it, when it carries one. */
  run?: string;
}

/** One attempt of a call, as the client saw it. */
export interface Attempt {
  /** HTTP status; absent when no response arrived (connection reset, timeout, abort). */
  status?: number;
  /** Present when the attempt got a definite outcome: a result, or a stored (deterministic) error. */
  answer?: Answer;
  /** The server said it replayed a stored outcome. */
  replayed?: boolean;
  /** Why there was no answer: `in_progress`, `store_unavailable`, `payload_mismatch`, a network error… */
  reason?: string;
}

/** One logical call: what a caller sent under one key, with every attempt (the link's retries and re-sends). */
export interface CallRecord {
  scope: string;
  key: string;
  /** Canonical JSON of the input. */
  input: string;
  attempts: Attempt[];
  /** Which life of the key the call belongs to: a key that expired and was used again starts a new epoch. */
  epoch?: number;
  /**
   * What the client told the app when the call last ended: `unknown` (`isOutcomeUnknown`: send it again with its
   * key), `failed` (definitive: the key is spent) or `succeeded`. Absent for runs that do not record it.
   */
  reported?: 'succeeded' | 'failed' | 'unknown';
  /** The user action the call serves: after a definitive failure the user tries again under a new key. */
  action?: string;
}

/** One handler execution, as a server reported it when the handler started. */
export interface Execution {
  scope: string;
  key: string;
  /** Unique per execution; answers and effects name it. */
  run: string;
  /** The process (incarnation) or instance that ran it. */
  worker?: string;
  takeover?: boolean;
  /** Set by the run when a fault it injected may legitimately make the handler run again; says which. */
  excused?: string;
  epoch?: number;
}

/** One committed effect of a keyed call (a row written through `ctx.idempotency.db`). */
export interface Effect {
  scope: string;
  key: string;
  /** The execution that wrote it. */
  run?: string;
  epoch?: number;
}

/** Something still in progress after the run settled. `key` is `*` when it cannot be tied to one key. */
export interface Stuck {
  scope: string;
  key: string;
  detail: string;
}

export interface History {
  mode: HistoryMode;
  /**
   * Every result (not a stored error) comes from an execution that committed an effect, as `payments.create`'s
   * do: then a result whose run committed nothing was never really done (`foreign-answer`).
   */
  resultsCommitEffects?: boolean;
  calls: CallRecord[];
  executions: Execution[];
  effects: Effect[];
  stuck: Stuck[];
}

export type Rule =
  | 'executed-twice'
  | 'effect-twice'
  | 'different-answers'
  | 'cross-scope'
  | 'foreign-answer'
  | 'one-outcome-two-inputs'
  | 'stuck'
  | 'failed-but-committed'
  | 'action-twice';

export interface Violation {
  rule: Rule;
  scope: string;
  key: string;
  message: string;
  /** Everything recorded for the key, one line per call, execution and effect. */
  history: string;
}

export interface HistoryCounts {
  keys: number;
  calls: number;
  attempts: number;
  /** Attempts that got an answer (a result or a stored error). */
  answers: number;
  replays: number;
  /** Attempts answered 409 (`in_progress`). */
  conflicts: number;
  executions: number;
  /** Executions a fault of the run excused. */
  excused: number;
  effects: number;
}

export interface HistoryVerdict {
  counts: HistoryCounts;
  violations: Violation[];
}

export const emptyHistory = (mode: HistoryMode): History => ({
  mode,
  calls: [],
  executions: [],
  effects: [],
  stuck: [],
});

interface KeyRecord {
  scope: string;
  key: string;
  epoch: number;
  calls: CallRecord[];
  executions: Execution[];
  effects: Effect[];
  stuck: Stuck[];
}

const groupId = (scope: string, key: string, epoch = 0) => JSON.stringify([scope, key, epoch]);

/** Applies every rule to every key of `history`. */
export function checkHistory(history: History): HistoryVerdict {
  const groups = new Map<string, KeyRecord>();
  const group = (scope: string, key: string, epoch = 0): KeyRecord => {
    const id = groupId(scope, key, epoch);
    let g = groups.get(id);
    if (!g) {
      g = { scope, key, epoch, calls: [], executions: [], effects: [], stuck: [] };
      groups.set(id, g);
    }
    return g;
  };
  const runs = new Map<string, Execution>();
  for (const c of history.calls) group(c.scope, c.key, c.epoch).calls.push(c);
  for (const e of history.executions) {
    group(e.scope, e.key, e.epoch).executions.push(e);
    runs.set(e.run, e);
  }
  for (const e of history.effects) {
    // An effect belongs to the life of the key its execution ran in.
    const epoch = e.epoch ?? (e.run ? runs.get(e.run)?.epoch : undefined);
    group(e.scope, e.key, epoch).effects.push(e);
  }
  const globalStuck = history.stuck.filter((s) => s.key === '*');
  for (const s of history.stuck) if (s.key !== '*') group(s.scope, s.key).stuck.push(s);

  const violations: Violation[] = [];
  for (const g of groups.values()) {
    const flag = (rule: Rule, message: string) =>
      violations.push({ rule, scope: g.scope, key: g.key, message, history: describeKey(g) });
    checkKey(g, history, runs, flag);
  }
  for (const s of globalStuck) {
    violations.push({ rule: 'stuck', scope: s.scope, key: '*', message: s.detail, history: s.detail });
  }
  checkActions(groups, violations);
  return { counts: countHistory(history, groups.size), violations };
}

function checkKey(
  g: KeyRecord,
  { mode, resultsCommitEffects }: History,
  runs: Map<string, Execution>,
  flag: (rule: Rule, message: string) => void,
): void {
  const counted = g.executions.filter((e) => !e.excused);
  if (counted.length > 1) {
    const takeovers = counted.filter((e) => e.takeover).length;
    flag(
      'executed-twice',
      mode === 'lease' && takeovers > 0
        ? `the handler ran ${counted.length} times, ${takeovers} of them taking over a holder no fault had cut off`
        : `the handler ran ${counted.length} times and no injected fault excuses the repeats`,
    );
  }
  if (g.effects.length > 1) flag('effect-twice', `${g.effects.length} committed effects for one key`);

  const answered = g.calls.flatMap((c) => c.attempts.flatMap((a) => (a.answer ? [{ call: c, answer: a.answer }] : [])));
  const outcomes = new Set(answered.map((a) => a.answer.outcome));
  if (outcomes.size > 1) flag('different-answers', `${outcomes.size} different outcomes: ${[...outcomes].join(' | ')}`);

  const committedRuns = new Set(g.effects.flatMap((e) => (e.run ? [e.run] : [])));
  for (const { call, answer } of answered) {
    if (answer.scope !== undefined && answer.scope !== call.scope) {
      flag('cross-scope', `a call of ${call.scope} was answered with an outcome of ${answer.scope}`);
    }
    if (answer.run === undefined) continue;
    const execution = runs.get(answer.run);
    if (!execution) {
      flag('foreign-answer', `answered by run ${answer.run}, which no server reported`);
    } else if (execution.scope !== call.scope || execution.key !== call.key) {
      flag(
        'cross-scope',
        `answered by run ${answer.run}, an execution of ${execution.scope} ${JSON.stringify(execution.key)}`,
      );
    } else if (committedRuns.size > 0 && !committedRuns.has(answer.run)) {
      flag('foreign-answer', `answered by run ${answer.run}, but run ${[...committedRuns].join(', ')} committed`);
    } else if (resultsCommitEffects && !answer.outcome.startsWith('error ') && !committedRuns.has(answer.run)) {
      flag('foreign-answer', `a result of run ${answer.run}, which committed nothing`);
    }
  }

  const resultInputs = new Set(answered.filter((a) => !a.answer.outcome.startsWith('error ')).map((a) => a.call.input));
  if (resultInputs.size > 1) {
    flag('one-outcome-two-inputs', `one key answered ${resultInputs.size} different inputs with a result`);
  }
  for (const s of g.stuck) flag('stuck', s.detail);
  if (g.effects.length > 0) {
    for (const c of g.calls.filter((c) => c.reported === 'failed')) {
      flag(
        'failed-but-committed',
        `a call of input ${c.input} was reported definitively failed, but its key committed`,
      );
    }
  }
}

/** `action-twice`: the effects of every key whose calls serve one action, counted together per scope. */
function checkActions(groups: Map<string, KeyRecord>, violations: Violation[]): void {
  const actions = new Map<string, KeyRecord[]>();
  for (const g of groups.values()) {
    const action = g.calls.find((c) => c.action !== undefined)?.action;
    if (action === undefined) continue;
    const id = JSON.stringify([g.scope, action]);
    actions.set(id, [...(actions.get(id) ?? []), g]);
  }
  for (const keys of actions.values()) {
    const effects = keys.reduce((n, g) => n + g.effects.length, 0);
    if (effects <= 1) continue;
    const [first] = keys as [KeyRecord];
    violations.push({
      rule: 'action-twice',
      scope: first.scope,
      key: keys.map((g) => g.key).join(', '),
      message: `action ${first.calls[0]?.action} committed ${effects} effects under ${keys.length} keys`,
      history: keys.map(describeKey).join('\n'),
    });
  }
}

function countHistory(history: History, keys: number): HistoryCounts {
  const attempts = history.calls.flatMap((c) => c.attempts);
  return {
    keys,
    calls: history.calls.length,
    attempts: attempts.length,
    answers: attempts.filter((a) => a.answer).length,
    replays: attempts.filter((a) => a.replayed).length,
    conflicts: attempts.filter((a) => a.status === 409 && !a.answer).length,
    executions: history.executions.length,
    excused: history.executions.filter((e) => e.excused).length,
    effects: history.effects.length,
  };
}

/** The key's whole story, readable in a failure message. */
function describeKey(g: KeyRecord): string {
  const lines = [`${g.scope} ${JSON.stringify(g.key)}${g.epoch ? ` (epoch ${g.epoch})` : ''}`];
  g.calls.forEach((c, i) => {
    const client = [c.action && `action ${c.action}`, c.reported && `reported ${c.reported}`].filter(Boolean);
    lines.push(`  call ${i + 1} input ${c.input}${client.length ? ` (${client.join(', ')})` : ''}`);
    for (const a of c.attempts) lines.push(`    ${describeAttempt(a)}`);
  });
  for (const e of g.executions) {
    const extras = [e.worker && `on ${e.worker}`, e.takeover && 'takeover', e.excused && `excused: ${e.excused}`];
    lines.push(`  execution ${e.run} ${extras.filter(Boolean).join(', ')}`.trimEnd());
  }
  for (const e of g.effects) lines.push(`  effect committed by ${e.run ?? 'an unknown run'}`);
  for (const s of g.stuck) lines.push(`  stuck: ${s.detail}`);
  return lines.join('\n');
}

function describeAttempt(a: Attempt): string {
  const status = a.status === undefined ? 'no response' : String(a.status);
  if (a.answer) return `${status} answer ${a.answer.outcome}${a.replayed ? ' (replayed)' : ''}`;
  return `${status} no answer${a.reason ? ` (${a.reason})` : ''}`;
}

/** The verdict as a few printable lines: the counts, then each violation with its key's history. */
export function formatVerdict(label: string, verdict: HistoryVerdict, limit = 5): string {
  const c = verdict.counts;
  const lines = [
    `[history:${label}] ${c.keys} keys, ${c.calls} calls, ${c.attempts} attempts (${c.answers} answered, ${c.replays} replays, ${c.conflicts} 409s), ${c.executions} executions (${c.excused} excused by injected faults), ${c.effects} effects, ${verdict.violations.length} violations`,
  ];
  for (const v of verdict.violations.slice(0, limit)) lines.push(`  ${v.rule}: ${v.message}\n${indent(v.history)}`);
  if (verdict.violations.length > limit) lines.push(`  … and ${verdict.violations.length - limit} more`);
  return lines.join('\n');
}

const indent = (text: string) =>
  text
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n');

/** JSON with object keys sorted, so equal values give equal strings whatever their key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}
