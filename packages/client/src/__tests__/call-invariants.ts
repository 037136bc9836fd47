import type { IdempotencyCallInfo } from '../types.js';
import type { Event } from './scheduled-link.js';

/** What the checker needs to know of one logical call besides the event log. */
export interface CallRecord {
  call: number;
  info: IdempotencyCallInfo;
  /** The caller's own key, when it gave one. */
  givenKey?: string;
}

const isEnd = (e: Event) =>
  (e.type === 'deliver' && (e.kind === 'next' || e.kind === 'error')) || e.type === 'caller-unsubscribe';

/**
 * The promises of the link, checked on one recorded history. Returns what was broken, one sentence each.
 * A call ends at its first outcome (a value or an error) or when its caller unsubscribes.
 */
export function violations(
  log: readonly Event[],
  calls: readonly CallRecord[],
  opts: { attempts: number; maxElapsedMs: number },
): string[] {
  const maxAttempts = opts.attempts;
  const out: string[] = [];
  const keys = new Map<unknown, number>();
  for (const { call, info, givenKey } of calls) {
    const say = (what: string) => out.push(`call ${call}: ${what}`);
    // `seq`: the position in the log, which orders events that happened at the same virtual time.
    const events = log.map((e, seq) => ({ e, seq })).filter(({ e }) => e.call === call);
    const end = events.find(({ e }) => isEnd(e));
    const endAt = end?.seq ?? Number.POSITIVE_INFINITY;
    const unsubscribedAt = events.find(({ e }) => e.type === 'caller-unsubscribe')?.seq ?? Number.POSITIVE_INFINITY;
    const delivered = events.filter(({ e }) => e.type === 'deliver');
    const shape = delivered.map(({ e }) => (e as { kind: string }).kind).join(',');

    // Exactly one outcome: a value then complete, or one error; less only if the caller left first.
    if (!end) say('never ended: no value, no error, and the caller did not unsubscribe');
    else if (end.e.type !== 'caller-unsubscribe' && shape !== 'next,complete' && shape !== 'error') {
      say(`delivered ${shape} instead of one value then complete, or one error`);
    }
    if (unsubscribedAt < Number.POSITIVE_INFINITY) {
      if (delivered.some(({ seq }) => seq > unsubscribedAt)) say('delivered something after its caller unsubscribed');
      if (!['', 'next', 'next,complete', 'error'].includes(shape)) say(`delivered ${shape}`);
    }

    // A value comes from a success of this call; a success that came before the end is what the caller gets.
    const successes = events.filter(({ e }) => e.type === 'emit' && e.kind === 'next');
    const value = delivered.find(({ e }) => e.type === 'deliver' && e.kind === 'next');
    if (value) {
      const data = (value.e as { data?: unknown }).data;
      if (!successes.some(({ e, seq }) => seq < value.seq && (e as { data?: unknown }).data === data)) {
        say(`delivered ${String(data)}, which no attempt of this call returned`);
      }
    }
    const firstSuccess = successes[0];
    if (firstSuccess && firstSuccess.seq < endAt) {
      const data = (firstSuccess.e as { data?: unknown }).data;
      if (end?.e.type !== 'deliver' || end.e.kind !== 'next' || end.e.data !== data) {
        say(`attempt returned ${String(data)} before the call ended, yet the caller got ${describe(end?.e)}`);
      }
    }

    // Nothing is sent once the call has ended; one key on every attempt; no more attempts than allowed.
    const sends = events.filter(({ e }) => e.type === 'send');
    if (sends.some(({ seq }) => seq > endAt)) say('sent an attempt after the call had ended');
    const sentKeys = new Set(sends.map(({ e }) => (e as { key: unknown }).key));
    if (sentKeys.size > 1) say(`sent ${sentKeys.size} different keys`);
    const key = [...sentKeys][0];
    if (key !== undefined) {
      if (info.key !== key) say(`info.key ${String(info.key)} is not the key sent, ${String(key)}`);
      if (givenKey !== undefined && key !== givenKey) say(`sent ${String(key)}, not the caller's key ${givenKey}`);
      if (keys.has(key)) say(`shares its key with call ${keys.get(key)}`);
      keys.set(key, call);
    }
    if (sends.length > maxAttempts) say(`sent ${sends.length} attempts, more than attempts = ${maxAttempts}`);

    // maxElapsedMs: no attempt starts past it, and the link ends the call by then (+1 ms: the shortest attempt).
    const start = events.find(({ e }) => e.type === 'start')?.e;
    const startedAt = start && 'at' in start ? start.at : 0;
    const late = (e: Event, slack: number) => 'at' in e && e.at - startedAt > opts.maxElapsedMs + slack;
    if (sends.some(({ e }) => late(e, 0))) say(`sent an attempt more than maxElapsedMs after the call started`);
    if (delivered.some(({ e }) => late(e, 1))) say(`ended more than maxElapsedMs + 1 ms after it started`);
    if (info.attempts !== sends.length) say(`info.attempts is ${info.attempts}, ${sends.length} were sent`);
    const retries = events.filter(({ e }) => e.type === 'retry').length;
    if (sends.length > 0 && retries !== sends.length - 1) say(`onRetry ran ${retries} times for ${sends.length} sends`);

    // A retry after an error the server gave a wait for (while its attempt was current) waits at least that.
    for (const { e } of sends) {
      if (e.type !== 'send' || e.attempt < 2) continue;
      const previous = events.filter(({ e: x }) => 'attempt' in x && x.attempt === e.attempt - 1);
      const asked = previous.find(({ e: x }) => x.type === 'emit' && x.kind === 'error');
      const letGoFirst = previous.some(({ e: x, seq }) => x.type === 'unsubscribe' && asked && seq < asked.seq);
      if (!asked || letGoFirst || asked.e.type !== 'emit' || asked.e.waitMs === undefined) continue;
      if (e.at - asked.e.at < asked.e.waitMs) {
        say(`attempt ${e.attempt} went ${e.at - asked.e.at} ms after the server asked to wait ${asked.e.waitMs} ms`);
      }
    }

    // Every attempt is let go of: it ended by itself or was unsubscribed.
    for (const { e } of sends) {
      const attempt = (e as { attempt: number }).attempt;
      const own = events.filter(({ e: x }) => 'attempt' in x && x.attempt === attempt);
      const released = own.some(
        ({ e: x }) => x.type === 'unsubscribe' || (x.type === 'emit' && (x.kind === 'error' || x.kind === 'complete')),
      );
      if (!released) say(`attempt ${attempt} was left subscribed`);
    }

    // onSettled and info.settled report an outcome the caller was given, once, with its error if it failed.
    const settled = events.filter(({ e }) => e.type === 'settled');
    const outcome = end && end.e.type === 'deliver' ? end.e : undefined;
    if (outcome) {
      if (settled.length !== 1) say(`onSettled ran ${settled.length} times for one outcome`);
      const error = (settled[0]?.e as { error?: unknown } | undefined)?.error;
      if ((outcome.kind === 'error') !== (error !== undefined)) {
        say(`onSettled said error ${String(error)} for ${outcome.kind}`);
      }
      if (!info.settled) say('info.settled is false after an outcome');
    } else if (settled.length > 0 || info.settled) {
      say('reported settled though its caller unsubscribed before any outcome');
    }
  }
  return out;
}

function describe(e: Event | undefined): string {
  if (!e) return 'nothing';
  if (e.type === 'deliver') return e.kind === 'next' ? `value ${String(e.data)}` : `an error (${String(e.error)})`;
  return e.type;
}
