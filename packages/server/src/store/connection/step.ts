import type { Step } from '../dialects/dialect.js';

/** A step that runs one statement and returns its rows. */
export function plain(sql: string, parameters: readonly unknown[] = []): Step {
  return async (c) => (await c.query(sql, parameters)).rows;
}

/** A step whose statement must change exactly one row: else the owner was fenced off (see FencedOffError). */
export function fenced(sql: string, parameters: readonly unknown[] = []): Step {
  return changingOne(sql, parameters, () => new FencedOffError());
}

/** Transaction mode's completion: its statement must change the claimed row, else see ClaimLostError. */
export function completing(sql: string, parameters: readonly unknown[] = []): Step {
  return changingOne(sql, parameters, () => new ClaimLostError());
}

function changingOne(sql: string, parameters: readonly unknown[], lost: () => Error): Step {
  return async (c) => {
    const result = await c.query(sql, parameters);
    if (Number(result.numAffectedRows ?? 0) === 0) throw lost();
    return result.rows;
  };
}

/** A lease owner's completion found its token replaced by a takeover (see DialectErrors.isFencedOff). */
export class FencedOffError extends Error {
  constructor() {
    super('idempotency: this lease owner was fenced off by a takeover; its writes were rolled back');
  }
}

/**
 * A transaction-mode completion found no claim of this call to store the result on: something inside the handler's
 * transaction deleted the key's row or marked it done. The transaction is rolled back, so the handler's writes never
 * commit without their stored result; the check is free, the row count comes with the UPDATE we send anyway (see
 * DialectErrors.isClaimLost).
 */
export class ClaimLostError extends Error {
  constructor() {
    super(
      "idempotency: the call's claim was gone at completion " +
        "(the key's row was deleted or changed inside its transaction)",
    );
  }
}
