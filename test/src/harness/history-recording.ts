import { type OperationContext, TRPCClientError, type TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import { DEFAULT_STORED_ERROR_CODES } from '@trpc-idempotency/server';
import {
  type Answer,
  type Attempt,
  type CallRecord,
  canonicalJson,
  checkHistory,
  type Execution,
  emptyHistory,
  type History,
  type HistoryMode,
} from './history.ts';
import type { EnterInfo } from './payments-app.ts';
import type { ServerEvent, ServerProcess } from './server-process.ts';

/** The codes a handler's error is stored under by default: such an error is an answer, not a failure. */
const STORED_CODES = new Set<string>(DEFAULT_STORED_ERROR_CODES);

/** Fills one {@link History}: calls through {@link recordingLink}, executions through {@link watch}. */
export class HistoryRecorder {
  readonly history: History;
  readonly #epochs = new Map<string, number>();

  /**
   * `resultsCommitEffects` (default true: the payments app's `payments.create` writes a ledger row on every
   * success) lets the checker flag a result whose execution committed nothing.
   */
  constructor(mode: HistoryMode, opts: { resultsCommitEffects?: boolean } = {}) {
    this.history = { ...emptyHistory(mode), resultsCommitEffects: opts.resultsCommitEffects ?? true };
  }

  #epoch(scope: string, key: string): number {
    return this.#epochs.get(JSON.stringify([scope, key])) ?? 0;
  }

  /** Starts a logical call; its attempts are pushed onto the returned record. */
  startCall(scope: string, key: string, input: unknown): CallRecord {
    const call: CallRecord = { scope, key, input: canonicalJson(input), attempts: [], epoch: this.#epoch(scope, key) };
    this.history.calls.push(call);
    return call;
  }

  /** Records a handler execution. */
  execution(e: Omit<Execution, 'epoch'>): Execution {
    const execution = { ...e, epoch: this.#epoch(e.scope, e.key) };
    this.history.executions.push(execution);
    return execution;
  }

  /** The key expired: later calls and executions of it start a new life, judged on their own. */
  expire(scope: string, key: string): void {
    this.#epochs.set(JSON.stringify([scope, key]), this.#epoch(scope, key) + 1);
  }

  /**
   * Excuses the executions `which` selects: a fault the run injected may legitimately have made them run again.
   * Returns how many were excused.
   */
  excuse(which: (e: Execution) => boolean, reason: string): number {
    let n = 0;
    for (const e of this.history.executions) {
      if (!e.excused && which(e)) {
        e.excused = reason;
        n++;
      }
    }
    return n;
  }

  /** Excuses every execution that committed no effect (call after the effects are in). */
  excuseUncommitted(reason: string): number {
    const committed = new Set(this.history.effects.map((e) => e.run));
    return this.excuse((e) => !committed.has(e.run), reason);
  }

  /**
   * Records the executions the servers report: `enter` starts one; the middleware's `executed` ends it. One the
   * middleware `released` (its writes rolled back, the key freed) may run again, and so may one still unfinished
   * when its process exits (a SIGKILL: its transaction died with it, or its lease will be taken over).
   */
  watch(...servers: ServerProcess[]): { stop(): void } {
    const offs = servers.map((server) => {
      const worker = () => `${server.opts.instance ?? 'main'}#${server.starts}`;
      const onEvent = (e: ServerEvent) => {
        if (e.ev === 'enter') this.enter(e as unknown as EnterInfo, worker());
        else if (e.ev === 'idem') this.middlewareEvent(e.event, worker());
      };
      const onExit = (_code: number | null, signal: string | null) =>
        this.workerDied(
          `${server.opts.instance ?? 'main'}#${server.starts}`,
          `its process exited (${signal ?? 'exit'})`,
        );
      server.on('event', onEvent);
      server.on('exit', onExit);
      return () => {
        server.off('event', onEvent);
        server.off('exit', onExit);
      };
    });
    return {
      stop: () => {
        for (const off of offs) off();
      },
    };
  }

  /** Executions started and not yet ended, by worker and then by scope and key. */
  readonly #running = new Map<string, Map<string, Execution>>();

  /** A handler started (an in-process server's `onEnter`, or a child's `enter` line). */
  enter(info: EnterInfo, worker = 'in-process'): void {
    const execution = this.execution({
      scope: info.scope,
      key: info.key,
      run: info.run,
      takeover: info.takeover,
      worker,
    });
    const running = this.#running.get(worker) ?? new Map<string, Execution>();
    running.set(JSON.stringify([info.scope, info.key]), execution);
    this.#running.set(worker, running);
  }

  /** A middleware event (`onEvent`): `executed` ends the key's execution on this worker, `released` excuses it. */
  middlewareEvent(event: unknown, worker = 'in-process'): void {
    const e = event as { type?: string; scope?: string; key?: string };
    if (e?.type !== 'executed' && e?.type !== 'released') return;
    const running = this.#running.get(worker);
    const id = JSON.stringify([e.scope, e.key]);
    const execution = running?.get(id);
    if (!execution) return;
    running?.delete(id);
    if (e.type === 'released') execution.excused ??= 'released by the middleware (writes rolled back, key freed)';
  }

  /** The worker is gone: whatever it had not finished may run again elsewhere. */
  workerDied(worker: string, reason: string): void {
    for (const execution of this.#running.get(worker)?.values() ?? []) execution.excused ??= reason;
    this.#running.delete(worker);
  }

  check() {
    return checkHistory(this.history);
  }
}

/** The attempt contexts' positions in their HTTP batch, recorded by {@link recordBatchPositions}. */
const batchPositions = new WeakMap<OperationContext, number>();

/** Wraps the HTTP link's `headers` so the recording link can read a batch's `Idempotent-Replayed: b0, b2`. */
export function recordBatchPositions<T extends object>(headers: (opts: T) => Promise<Record<string, string>>) {
  return (opts: T) => {
    const o = opts as { op?: { context: OperationContext }; opList?: readonly { context: OperationContext }[] };
    const ops = o.opList ?? (o.op ? [o.op] : []);
    ops.forEach((op, i) => {
      batchPositions.set(op.context, i);
    });
    return headers(opts);
  };
}

/** Pass one as `context.historyCall` on every send of a logical call: its re-sends join one record. */
export interface CallHolder {
  record?: CallRecord;
}

/**
 * A link between `idempotencyLink` and the HTTP link: it sees every attempt of every keyed call and records its
 * answer. A caller's re-sends with the same key join one record when they share a {@link CallHolder} in
 * `context.historyCall`; without one, each logical call through the link gets a record of its own.
 */
export function recordingLink<TRouter extends AnyRouter>(recorder: HistoryRecorder, scope: string): TRPCLink<TRouter> {
  return () => {
    const byOp = new Map<number, CallRecord>();
    return ({ op, next }) => {
      const key = op.context.idempotencyKey;
      if (op.type !== 'mutation' || typeof key !== 'string') return next(op);
      const holder = op.context.historyCall as CallHolder | undefined;
      let call = holder?.record ?? byOp.get(op.id);
      if (!call) {
        call = recorder.startCall(scope, key, op.input);
        byOp.set(op.id, call);
        if (holder) holder.record = call;
      }
      const attempt: Attempt = {};
      call.attempts.push(attempt);
      return observable((observer) => {
        let answered = false;
        const subscription = next(op).subscribe({
          next(envelope) {
            answered = true;
            const data = (envelope.result as { data?: unknown }).data;
            attempt.status = readStatus(envelope.context) ?? 200;
            attempt.answer = resultAnswer(data);
            attempt.replayed = replayed(envelope.context, op.context);
            observer.next(envelope);
          },
          error(error) {
            answered = true;
            Object.assign(attempt, errorAttempt(error, op.context));
            observer.error(error);
          },
          complete() {
            observer.complete();
          },
        });
        return () => {
          // Unsubscribed before any answer: the link's attempt timeout or an abort.
          if (!answered) attempt.reason = 'abandoned (attempt timeout or abort)';
          subscription.unsubscribe();
        };
      });
    };
  };
}

function resultAnswer(data: unknown): Answer {
  const d = (data ?? {}) as { scope?: unknown; run?: unknown };
  return {
    outcome: canonicalJson(data),
    ...(typeof d.scope === 'string' ? { scope: d.scope } : {}),
    ...(typeof d.run === 'string' ? { run: d.run } : {}),
  };
}

function errorAttempt(error: unknown, context: OperationContext): Attempt {
  if (!(error instanceof TRPCClientError)) return { reason: String(error).slice(0, 80) };
  const data = error.data as { httpStatus?: number; code?: string; idempotency?: { reason?: string } } | undefined;
  const status = data?.httpStatus;
  const reason = data?.idempotency?.reason;
  if (status === undefined) return { reason: error.message.slice(0, 80) };
  if (reason !== undefined || !data?.code || !STORED_CODES.has(data.code)) {
    return { status, reason: reason ?? `${data?.code ?? 'error'}: ${error.message.slice(0, 60)}` };
  }
  // A stored (deterministic) error is an answer; the payments app writes its run and scope into the message.
  let named: { run?: unknown; scope?: unknown } = {};
  try {
    named = JSON.parse(error.message) as typeof named;
  } catch {}
  return {
    status,
    replayed: replayed(error.meta, context),
    answer: {
      outcome: `error ${data.code}: ${error.message}`,
      ...(typeof named.scope === 'string' ? { scope: named.scope } : {}),
      ...(typeof named.run === 'string' ? { run: named.run } : {}),
    },
  };
}

interface MetaLike {
  response?: { status?: number; headers?: { get(name: string): string | null } };
}

function readStatus(meta: unknown): number | undefined {
  return (meta as MetaLike | undefined)?.response?.status;
}

function replayed(meta: unknown, context: OperationContext): boolean {
  const value = (meta as MetaLike | undefined)?.response?.headers?.get('idempotent-replayed')?.trim();
  if (!value) return false;
  if (value === 'true' || value === '?1') return true;
  const position = batchPositions.get(context);
  return position !== undefined && value.split(',').some((t) => t.trim() === `b${position}`);
}
