import type { Transaction } from 'kysely';
import type { Call, Runtime } from '../middleware/call.js';
import { downstreamKey } from '../middleware/downstream-key.js';
import { oversizedBytes } from '../middleware/response-limit.js';
import { decodeStoredResponse, encodeStoredResponse, replayOutcome } from '../serialize/stored-response.js';
import type { LeaseOwner, Session } from '../store/dialects/dialect.js';
import { createHandlerDb } from '../store/handler-db.js';
import type { HeldLease } from './lease-renewer.js';

/** Bumped if the recorded form ever changes, so a takeover never misreads an older version's steps. */
const FORMAT_VERSION = 1;

/** One completed step as the `steps` column records it: its name and its result, stored as a response is. */
interface RecordedStep {
  name: string;
  result: string;
}

/** What the `steps` column holds: the call it belongs to (a takeover by another payload ignores it) and its steps. */
interface RecordedSteps {
  v: typeof FORMAT_VERSION;
  fingerprint: string;
  path: string;
  steps: RecordedStep[];
}

/** The derived key of step `index` named `name`: `downstreamKey(purpose)` with this purpose (documented). */
export function stepPurpose(index: number, name: string): string {
  return `step:${index}:${name}`;
}

/**
 * A step of this call was replayed under another name than the one recorded at its place: the handler's steps
 * changed between the call and its retry (a deploy renamed or reordered them). Nothing ran; the recorded steps stay.
 */
export class StepMismatchError extends Error {
  constructor(index: number, name: string, recorded: string) {
    super(
      `ctx.idempotency.step('${name}') is step ${index} of this call, but the key recorded step ${index} ` +
        `as '${recorded}': a call's steps must keep their names and order on every retry`,
    );
    this.name = 'StepMismatchError';
  }
}

/**
 * Lease mode's durable steps for one owned call (`ctx.idempotency.step`). A step ends the handler's transaction
 * (so no lock is held while a provider works), runs, records its result on the key's row in its own fenced
 * statement, then opens a new handler transaction that takes the key's lock again and checks the token still owns
 * the row. A takeover reads the recorded steps and replays them in order without running them. Nothing here runs
 * unless the handler calls `step`.
 */
export class LeaseSteps {
  readonly #rt: Runtime;
  readonly #call: Call;
  readonly #owner: LeaseOwner;
  readonly #held: HeldLease | undefined;
  readonly #takeover: boolean;
  #session: Session | undefined;
  #db: Transaction<any> | undefined;
  /** Steps recorded on the row (undefined until the first `step` reads them). */
  #recorded: RecordedStep[] | undefined;
  #next = 0;
  #running = false;

  constructor(rt: Runtime, call: Call, owner: LeaseOwner, session: Session, takeover: boolean, held?: HeldLease) {
    this.#rt = rt;
    this.#call = call;
    this.#owner = owner;
    this.#session = session;
    this.#takeover = takeover;
    this.#held = held;
  }

  /** The handler's transaction now; undefined when it could not be opened again after a step (see lease-mode). */
  get session(): Session | undefined {
    return this.#session;
  }

  /** True when the row holds recorded steps: a failed call lets its lease lapse instead of deleting them. */
  get recorded(): boolean {
    return (this.#recorded?.length ?? 0) > 0;
  }

  /** `ctx.idempotency.db`: the current transaction's handle, made when first asked for. */
  get db(): Transaction<any> {
    if (!this.#session) throw new Error('ctx.idempotency.db is unavailable: the call lost its key during a step');
    this.#db ??= createHandlerDb(this.#rt.db, this.#session.executor);
    return this.#db;
  }

  async run<T>(name: string, fn: (stepKey: string) => T | Promise<T>): Promise<T> {
    if (typeof name !== 'string' || name === '')
      throw new TypeError('ctx.idempotency.step(name, fn): name is a non-empty string');
    if (!this.#session)
      throw new Error(`ctx.idempotency.step('${name}'): the call lost its key during an earlier step`);
    if (this.#running) {
      throw new Error(
        `ctx.idempotency.step('${name}') was called while another step still ran: await each step before the next`,
      );
    }
    if (this.#db) {
      throw new Error(
        `ctx.idempotency.step('${name}') was called after ctx.idempotency.db: ` +
          "call every step before the handler's first use of ctx.idempotency.db " +
          "(a step ends the call's transaction while it runs)",
      );
    }
    this.#running = true;
    const index = this.#next++;
    const trace = this.#call.trace?.step(name, index);
    let failure: unknown;
    try {
      const recorded = await this.#load();
      const done = recorded[index];
      if (done) {
        if (done.name !== name) throw new StepMismatchError(index, name, done.name);
        trace?.replayed();
        return replayOutcome(decodeStoredResponse(done.result, this.#rt.options.serializer)) as T;
      }
      const { options } = this.#rt;
      const stepKey = await downstreamKey(options.table, this.#call.scope, this.#call.key, stepPurpose(index, name));
      await this.#suspend();
      let value: T;
      try {
        value = await (trace ? trace.run(() => fn(stepKey)) : fn(stepKey));
        await this.#record(recorded, name, value);
      } catch (error) {
        // Not recorded: the error is the handler's to handle; a retry runs this step again, with the same key.
        await this.#resume().catch(() => {});
        throw error;
      }
      await this.#resume();
      return value;
    } catch (error) {
      failure = error;
      throw error;
    } finally {
      this.#running = false;
      trace?.end(failure);
    }
  }

  /**
   * The steps recorded on the row. A first claim has none; a takeover reads them, through the handler's transaction
   * (on one connection, PGlite and SQLite, nothing else could run meanwhile). Steps of another payload (the row
   * expired and a new call took it over) are not this call's.
   */
  async #load(): Promise<RecordedStep[]> {
    if (this.#recorded) return this.#recorded;
    let recorded: RecordedStep[] = [];
    if (this.#takeover && this.#session) {
      const rows = (await this.#session.run([this.#rt.stepSql.select(this.#owner)]))[0] ?? [];
      if (rows.length === 0) throw this.#lost();
      const text = rows[0]?.steps;
      if (typeof text === 'string') {
        const found = JSON.parse(text) as RecordedSteps;
        if (found.v !== FORMAT_VERSION) throw new Error(`idempotency: unknown steps format ${JSON.stringify(found.v)}`);
        if (found.fingerprint === this.#call.fingerprint && found.path === this.#call.path) recorded = found.steps;
      }
    }
    this.#recorded = recorded;
    return recorded;
  }

  /** Records the step's result with the ones before it, in one autocommit statement fenced by the token. */
  async #record(before: RecordedStep[], name: string, value: unknown): Promise<void> {
    const rt = this.#rt;
    const steps = [...before, { name, result: encodeStoredResponse({ ok: true, data: value }, rt.options.serializer) }];
    const text = JSON.stringify({
      v: FORMAT_VERSION,
      fingerprint: this.#call.fingerprint,
      path: this.#call.path,
      steps,
    });
    const bytes = oversizedBytes(rt, text);
    if (bytes !== undefined) {
      throw new RangeError(
        `ctx.idempotency.step('${name}'): the call's recorded steps would take ${bytes} bytes, ` +
          'over what one statement may store (maxResponseBytes): return less from the step',
      );
    }
    const rows = (await rt.store.autocommit([rt.stepSql.record(this.#owner, text)]))[0] ?? [];
    if (rows.length === 0) throw this.#lost();
    this.#recorded = steps;
  }

  /** Ends the handler's transaction (it holds nothing of the handler's: no `db` before a step) and its lock. */
  async #suspend(): Promise<void> {
    const session = this.#session;
    this.#session = undefined;
    // Renewals now keep the lease without the lock (a paused process loses the key when the lease runs out).
    if (this.#held) this.#held.locked = false;
    await session?.commit([]);
  }

  /** Opens the handler's transaction again: the key's lock, then whether the token still owns the row. */
  async #resume(): Promise<void> {
    const { store, sql } = this.#rt;
    const { session, rows } = await store.begin(sql.holdLease(this.#owner));
    if ((rows[1]?.length ?? 0) === 0) {
      await session.rollback().catch(() => {});
      throw this.#lost();
    }
    this.#session = session;
    if (this.#held) this.#held.locked = true;
  }

  /** Another call took the key over: this one stops and stores nothing; lease mode answers 409 (see runOwned). */
  #lost(): Error {
    this.#held?.lose('another call took the key over during a step');
    return new Error(
      `idempotency: another call took key "${this.#call.key}" over during a step; ` +
        "this call's outcome will not be stored",
    );
  }
}
