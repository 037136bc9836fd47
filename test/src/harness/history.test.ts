import { describe, expect, it } from 'vitest';
import { type Attempt, type CallRecord, checkHistory, emptyHistory, type History, type Rule } from './history.ts';

const ok = (run: string, scope = 'user:a', extra: Partial<Attempt> = {}): Attempt => ({
  status: 200,
  answer: { outcome: JSON.stringify({ paymentId: run, run, scope }), run, scope },
  ...extra,
});
const noAnswer = (status: number | undefined, reason: string): Attempt => ({
  ...(status === undefined ? {} : { status }),
  reason,
});
const call = (attempts: Attempt[], over: Partial<CallRecord> = {}): CallRecord => ({
  scope: 'user:a',
  key: 'k1',
  input: '{"amount":1}',
  attempts,
  ...over,
});

/** A healthy history: one execution, its effect, a lost first answer, a 409 and a replay. */
function healthy(mode: History['mode'] = 'transaction'): History {
  return {
    ...emptyHistory(mode),
    calls: [
      call([noAnswer(undefined, 'fetch failed'), noAnswer(409, 'in_progress'), ok('r1', 'user:a', { replayed: true })]),
      call([noAnswer(503, 'store_unavailable'), ok('r1', 'user:a', { replayed: true })]),
    ],
    executions: [{ scope: 'user:a', key: 'k1', run: 'r1' }],
    effects: [{ scope: 'user:a', key: 'k1', run: 'r1' }],
  };
}

const rules = (h: History): Rule[] => checkHistory(h).violations.map((v) => v.rule);

describe('the history checker', () => {
  it('passes a healthy history and counts it (409, 503 and network failures are no answer)', () => {
    const verdict = checkHistory(healthy());
    expect(verdict.violations).toEqual([]);
    expect(verdict.counts).toEqual({
      keys: 1,
      calls: 2,
      attempts: 5,
      answers: 2,
      replays: 2,
      conflicts: 1,
      executions: 1,
      excused: 0,
      effects: 1,
    });
  });

  it('catches a double execution in transaction mode, with the key and its history', () => {
    const h = healthy();
    h.executions.push({ scope: 'user:a', key: 'k1', run: 'r2', worker: 'i1' });
    const [violation] = checkHistory(h).violations;
    expect(violation?.rule).toBe('executed-twice');
    expect(violation?.key).toBe('k1');
    expect(violation?.history).toContain('execution r2 on i1');
    expect(violation?.history).toContain('409 no answer (in_progress)');
  });

  it('catches a lease-mode takeover of a holder no fault cut off, and accepts one after an injected fault', () => {
    const h = healthy('lease');
    h.executions.push({ scope: 'user:a', key: 'k1', run: 'r2', takeover: true });
    expect(rules(h)).toEqual(['executed-twice']);
    expect(checkHistory(h).violations[0]?.message).toContain('taking over a holder');
    h.executions[0]!.excused = 'its process exited (SIGKILL)';
    expect(rules(h)).toEqual([]);
  });

  it('catches two committed effects for one key', () => {
    const h = healthy('lease');
    h.effects.push({ scope: 'user:a', key: 'k1', run: 'r1' });
    expect(rules(h)).toEqual(['effect-twice']);
  });

  it('catches two different answers for one key (a stored error against a result)', () => {
    const h = healthy('lease');
    h.calls.push(
      call([{ status: 402, answer: { outcome: 'error PAYMENT_REQUIRED: declined', run: 'r1', scope: 'user:a' } }]),
    );
    expect(rules(h)).toEqual(['different-answers']);
  });

  it('catches an answer carrying another scope, and one produced by another scope’s execution', () => {
    const h = healthy();
    h.calls.push(call([ok('r1', 'user:a')], { scope: 'user:b' }));
    h.executions.push({ scope: 'user:b', key: 'k1', run: 'rb' });
    expect(rules(h)).toContain('cross-scope');

    const unlabelled = healthy();
    // Tenant B's call was answered with tenant A's row; the answer itself does not say whose it is.
    unlabelled.calls.push(call([{ status: 200, answer: { outcome: 'x', run: 'r1' } }], { scope: 'user:b' }));
    expect(rules(unlabelled)).toContain('cross-scope');
  });

  it('catches an answer from an execution that did not commit, or that no server reported', () => {
    const h = healthy();
    h.executions.push({ scope: 'user:a', key: 'k1', run: 'r0', excused: 'connection terminated' });
    h.calls.push(call([ok('r0')]));
    expect(rules(h)).toEqual(['different-answers', 'foreign-answer']);

    const ghost = healthy();
    ghost.calls = [call([ok('r9')])];
    expect(rules(ghost)).toEqual(['foreign-answer']);
  });

  it('catches a result whose execution committed nothing, where every result commits an effect', () => {
    const h = healthy();
    h.effects = [];
    expect(rules(h)).toEqual([]);
    h.resultsCommitEffects = true;
    expect(rules(h)).toEqual(['foreign-answer', 'foreign-answer']);
  });

  it('catches one result given to two different inputs (a fingerprint collision)', () => {
    const h = healthy();
    h.calls.push(call([ok('r1', 'user:a', { replayed: true })], { input: '{"amount":9999}' }));
    expect(rules(h)).toEqual(['one-outcome-two-inputs']);
  });

  it('catches a key left in progress, and a connection left idle in transaction', () => {
    const h = healthy();
    h.stuck.push({ scope: 'user:a', key: 'k1', detail: 'in_progress with a dead lease and nobody to finish it' });
    h.stuck.push({ scope: '*', key: '*', detail: 'connection 42 idle in transaction' });
    const verdict = checkHistory(h);
    expect(verdict.violations.map((v) => [v.rule, v.key])).toEqual([
      ['stuck', 'k1'],
      ['stuck', '*'],
    ]);
  });

  it('judges each life of a key on its own once it expired', () => {
    const h = healthy();
    h.executions.push({ scope: 'user:a', key: 'k1', run: 'r2', epoch: 1 });
    h.effects.push({ scope: 'user:a', key: 'k1', run: 'r2' });
    h.calls.push(call([ok('r2')], { epoch: 1 }));
    expect(rules(h)).toEqual([]);
    // The old life's answer given after the key expired and ran again is a second answer of the new life.
    h.calls.push(call([ok('r1')], { epoch: 1 }));
    expect(rules(h)).toEqual(['different-answers', 'foreign-answer']);
  });

  it("catches a call reported definitively failed whose key committed: the answer that ended it was not the key's", () => {
    const h = healthy();
    h.calls.push(call([noAnswer(undefined, 'fetch failed'), noAnswer(401, 'UNAUTHORIZED')], { reported: 'unknown' }));
    expect(rules(h)).toEqual([]);
    h.calls[2]!.reported = 'failed';
    const [violation] = checkHistory(h).violations;
    expect(violation?.rule).toBe('failed-but-committed');
    expect(violation?.history).toContain('reported failed');
    // A definitive failure of a key that committed nothing (a first attempt refused 401) is the truth.
    h.effects = [];
    expect(rules(h)).toEqual([]);
  });

  it('catches one action committed under two keys (the user paid again after a wrong "failed")', () => {
    const payAgain = (scope: string) => {
      const h = healthy();
      h.calls[0]!.action = 'order-1';
      h.calls.push(call([ok('r2', scope)], { scope, key: 'k2', action: 'order-1', reported: 'succeeded' }));
      h.executions.push({ scope, key: 'k2', run: 'r2' });
      h.effects.push({ scope, key: 'k2', run: 'r2' });
      return h;
    };
    const [violation] = checkHistory(payAgain('user:a')).violations;
    expect([violation?.rule, violation?.key]).toEqual(['action-twice', 'k1, k2']);
    // Another user's action of the same name is theirs.
    expect(rules(payAgain('user:b'))).toEqual([]);
  });
});
