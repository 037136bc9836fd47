import { createTRPCUntypedClient } from '@trpc/client';
import { idempotencyLink, isOutcomeUnknown, pendingCallsLink } from '@trpc-idempotency/client';
import { describe, expect, test } from 'vitest';
import { ledgerServer, type Network } from '../__tests__/ledger-server.js';
import { EarlierOutcomeUnknownError } from '../earlier-outcome-unknown-error.js';
import { type EarlierOutcome, NewInputNotConfirmedError } from '../new-input-not-confirmed-error.js';
import { ActionController, type ActionHooks } from './action-controller.js';

type Input = { amountCents: number; description?: string };

/** A controller over a real link chain (pendingCallsLink → idempotencyLink, 2 attempts) to a ledger server. */
function setup(
  network?: Network,
  opts: {
    declines?: (input: unknown) => boolean;
    confirmNewInput?: ActionHooks<unknown, Input>['confirmNewInput'];
  } = {},
) {
  const server = ledgerServer(network, opts.declines);
  const client = createTRPCUntypedClient({
    links: [
      pendingCallsLink<any>({ procedures: ['pay'] }),
      idempotencyLink<any>({ procedures: ['pay'], attempts: 2, baseDelayMs: 0, budget: false }),
      server.link,
    ],
  });
  const earlier: EarlierOutcome<unknown, Input>[] = [];
  let n = 0;
  const controller = new ActionController<unknown, Input>(() => ({
    generateKey: () => `key-${++n}`,
    onEarlierSettled: (outcome) => earlier.push(outcome),
    confirmNewInput: opts.confirmNewInput,
  }));
  const pay = (input: Input) => controller.run(input, undefined, (v) => client.mutation('pay', v));
  const keys = () => server.attempts.map((op) => op.context.idempotencyKey);
  return { controller, pay, server, keys, earlier };
}

const settle = (p: Promise<unknown>) =>
  p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );

describe('one key per user action', () => {
  test('a generateKey that gives no key fails the action before anything is sent', async () => {
    const server = ledgerServer();
    const client = createTRPCUntypedClient({
      links: [idempotencyLink<any>({ procedures: ['pay'], attempts: 1, budget: false }), server.link],
    });
    const controller = new ActionController<unknown, Input>(() => ({
      generateKey: () => undefined as unknown as string,
      onEarlierSettled: () => {},
    }));
    const pay = () => controller.run({ amountCents: 1 }, undefined, (v) => client.mutation('pay', v));
    const outcomes = await Promise.all([settle(pay()), settle(pay())]);
    expect(outcomes.map((o) => String((o as { error?: unknown }).error))).toEqual([
      expect.stringMatching(/generateKey/),
      expect.stringMatching(/generateKey/),
    ]);
    expect(server.ledger).toHaveLength(0);
  });

  test('a double submit sends both copies under one key: one ledger row', async () => {
    const { pay, server, keys } = setup();
    const [a, b] = await Promise.all([pay({ amountCents: 4000 }), pay({ amountCents: 4000 })]);
    expect(a).toEqual(b);
    expect(keys()).toEqual(['key-1', 'key-1']);
    expect(server.ledger).toHaveLength(1);
  });

  test('"try again" after the link gave up reuses the key; the retry is a replay: one row', async () => {
    const { pay, server, keys, controller } = setup((n) => (n <= 2 ? 'lose' : 'deliver'));
    const first = await settle(pay({ amountCents: 4000 }));
    expect(first).toHaveProperty('error');
    expect(controller.key).toBe('key-1'); // kept: the outcome is unknown
    expect(await pay({ amountCents: 4000 })).toEqual({ id: 1 });
    expect(keys()).toEqual(['key-1', 'key-1', 'key-1']);
    expect(server.ledger).toHaveLength(1);
  });

  test('a definitive answer spends the key: the next submission of the same input is a new payment', async () => {
    const { pay, server, keys, controller } = setup();
    await pay({ amountCents: 4000 });
    expect(controller.key).toBeUndefined();
    await pay({ amountCents: 4000 });
    expect(keys()).toEqual(['key-1', 'key-2']);
    expect(server.ledger).toHaveLength(2);
  });

  test('the same input with its keys in another order is the same submission', async () => {
    const { pay, keys } = setup((n) => (n <= 2 ? 'lose' : 'deliver'));
    await settle(pay({ amountCents: 1, description: 'a' }));
    await pay({ description: 'a', amountCents: 1 });
    expect(new Set(keys())).toEqual(new Set(['key-1']));
  });
});

describe('a changed input after an unknown outcome', () => {
  // It reports the earlier one, and the new input is paid once confirmed.
  test('settles the earlier submission (its key and input), then pays the new input under a new key', async () => {
    const { pay, server, keys, earlier } = setup((n) => (n <= 2 ? 'lose' : 'deliver'), { confirmNewInput: () => true });
    await settle(pay({ amountCents: 1000 }));
    expect(await pay({ amountCents: 1100 })).toEqual({ id: 2 });
    expect(server.attempts.map((op) => [op.context.idempotencyKey, (op.input as Input).amountCents])).toEqual([
      ['key-1', 1000],
      ['key-1', 1000],
      ['key-1', 1000], // the earlier submission, settled: a replay of the charge the lost answers hid
      ['key-2', 1100],
    ]);
    expect(earlier).toEqual([
      { status: 'succeeded', key: 'key-1', variables: { amountCents: 1000 }, data: { id: 1 }, replayed: true },
    ]);
    expect(server.ledger.map((row) => row.key)).toEqual(['key-1', 'key-2']);
    expect(keys()).not.toContain(undefined);
  });

  test('never sends the new input while the earlier outcome is unknown: EarlierOutcomeUnknownError', async () => {
    const { pay, server, controller } = setup(() => 'lose');
    await settle(pay({ amountCents: 1000 }));
    const changed = await settle(pay({ amountCents: 1100 }));
    expect((changed as { error: unknown }).error).toBeInstanceOf(EarlierOutcomeUnknownError);
    // The changed input was never sent: its outcome is known, and reads apart from a lost answer's.
    expect(isOutcomeUnknown((changed as { error: unknown }).error)).toBe(false);
    expect(server.attempts.every((op) => (op.input as Input).amountCents === 1000)).toBe(true);
    expect(controller.key).toBe('key-1');
  });

  test('an earlier submission still in flight is waited for, not re-sent, and its outcome reported', async () => {
    const { pay, server, earlier } = setup(undefined, { confirmNewInput: () => true });
    const first = pay({ amountCents: 1000 });
    const second = pay({ amountCents: 1100 }); // changed before the first answered
    await Promise.all([first, second]);
    expect(server.attempts.map((op) => op.context.idempotencyKey)).toEqual(['key-1', 'key-2']);
    expect(earlier.map((e) => [e.status, e.key])).toEqual([['succeeded', 'key-1']]);
    expect(server.ledger).toHaveLength(2);
  });
});

describe('the app decides before a changed input goes out', () => {
  const amounts = (server: ReturnType<typeof ledgerServer>) =>
    server.attempts.map((op) => [op.context.idempotencyKey, (op.input as Input).amountCents]);

  test('by default a changed input is not sent once the earlier went through: NewInputNotConfirmedError', async () => {
    const { pay, server, earlier, controller } = setup((n) => (n <= 2 ? 'lose' : 'deliver'));
    await settle(pay({ amountCents: 1000 }));
    const changed = await settle(pay({ amountCents: 1100 }));
    const error = (changed as { error: unknown }).error;
    expect(error).toBeInstanceOf(NewInputNotConfirmedError);
    expect(error).toMatchObject({ variables: { amountCents: 1100 }, earlier: { status: 'succeeded', key: 'key-1' } });
    expect(isOutcomeUnknown(error)).toBe(false);
    expect(earlier.map((e) => [e.status, e.key])).toEqual([['succeeded', 'key-1']]);
    expect(amounts(server)).toEqual([
      ['key-1', 1000],
      ['key-1', 1000],
      ['key-1', 1000],
    ]);
    expect(controller.key).toBeUndefined(); // the earlier key is spent, none made for the unsent input
    // Submitted again, it is a new action: sent under a new key, never under the earlier one.
    expect(await pay({ amountCents: 1100 })).toEqual({ id: 2 });
    expect(amounts(server).at(-1)).toEqual(['key-2', 1100]);
    expect(server.ledger).toHaveLength(2);
  });

  test('by default a changed input goes out when the earlier one was declined', async () => {
    const declines = (input: unknown) => (input as Input).amountCents > 5000;
    const { pay, server, earlier } = setup((n) => (n <= 2 ? 'lose' : 'deliver'), { declines });
    await settle(pay({ amountCents: 9000 }));
    expect(await pay({ amountCents: 1100 })).toEqual({ id: 1 });
    expect(earlier.map((e) => [e.status, e.key])).toEqual([['failed', 'key-1']]);
    expect(amounts(server).at(-1)).toEqual(['key-2', 1100]);
    expect(server.ledger.map((row) => row.key)).toEqual(['key-2']);
  });

  test('confirmNewInput is asked with the earlier outcome and the new input before anything new is sent', async () => {
    let answer: (yes: boolean) => void = () => {};
    const asked: unknown[] = [];
    const { pay, server } = setup((n) => (n <= 2 ? 'lose' : 'deliver'), {
      confirmNewInput: (outcome, variables) => {
        asked.push([outcome.status, outcome.key, variables]);
        return new Promise<boolean>((resolve) => (answer = resolve));
      },
    });
    await settle(pay({ amountCents: 1000 }));
    const changed = pay({ amountCents: 1100 });
    const copy = pay({ amountCents: 1100 }); // a double click while the dialog is open: asked once
    await expect.poll(() => asked).toEqual([['succeeded', 'key-1', { amountCents: 1100 }]]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(amounts(server).filter(([, amount]) => amount === 1100)).toEqual([]); // nothing sent while it waits
    answer(true);
    expect(await changed).toEqual({ id: 2 });
    expect(await copy).toEqual({ id: 2 });
    expect(amounts(server).filter(([, amount]) => amount === 1100)).toEqual([
      ['key-2', 1100],
      ['key-2', 1100],
    ]);
    expect(server.ledger).toHaveLength(2);
  });

  test('a declined changed input sends nothing and leaves the earlier key spent; every copy is refused', async () => {
    const { pay, server, controller } = setup((n) => (n <= 2 ? 'lose' : 'deliver'), {
      confirmNewInput: async () => false,
    });
    await settle(pay({ amountCents: 1000 }));
    const outcomes = await Promise.all([settle(pay({ amountCents: 1100 })), settle(pay({ amountCents: 1100 }))]);
    for (const o of outcomes) expect((o as { error: unknown }).error).toBeInstanceOf(NewInputNotConfirmedError);
    expect(amounts(server).every(([, amount]) => amount === 1000)).toBe(true);
    expect(controller.key).toBeUndefined();
    expect(server.ledger).toHaveLength(1);
  });
});

describe('without pendingCallsLink in the chain', () => {
  test('the controller is told the key did not reach the link (the hook logs an error)', async () => {
    const server = ledgerServer();
    const client = createTRPCUntypedClient({
      links: [idempotencyLink<any>({ procedures: ['pay'], budget: false }), server.link],
    });
    let notDelivered = 0;
    const controller = new ActionController<unknown, Input>(() => ({
      generateKey: () => 'action-key',
      onNotDelivered: () => notDelivered++,
    }));
    await controller.run({ amountCents: 1 }, undefined, (v) => client.mutation('pay', v));
    expect(notDelivered).toBe(1);
    expect(server.attempts[0]!.context.idempotencyKey).not.toBe('action-key');
  });
});
