'use client';

import { useQuery, useQueryClient } from '@tanstack/react-query';
import { TRPCClientError } from '@trpc/client';
import { getIdempotencyReason, type IdempotencyCallInfo, type PendingCallsLink } from '@trpc-idempotency/client';
import {
  EarlierOutcomeUnknownError,
  type IdempotentCallResult,
  NewInputNotConfirmedError,
  useIdempotentMutation,
  useResumePendingCalls,
} from '@trpc-idempotency/react';
import { useRef, useState } from 'react';
import { useTRPC, useTRPCClient } from '@/client/trpc';
import type { FaultMode } from '@/network/faultModes';
import type { NetworkAttempt } from '@/network/flakyFetch';
import type { AppRouter } from '@/server/router';
import { formatCents, parseAmount } from './format';
import { Ledger } from './Ledger';
import { NetworkControl } from './NetworkControl';
import { PayStatus } from './PayStatus';
import { ResumeBanners } from './ResumeBanners';
import { type Submission, Submissions } from './Submissions';

type PaymentInput = { amountCents: number; description: string };

function outcomeOf(call: IdempotentCallResult<{ id: number }, PaymentInput>): Partial<Submission> {
  if (call.status === 'succeeded') return { outcome: 'charged', paymentId: call.data.id };
  const error = call.error;
  const message = error instanceof Error ? error.message : String(error);
  const reason = getIdempotencyReason(error);
  if (call.status === 'unknown') return { outcome: 'unknown', message };
  const declined = error instanceof TRPCClientError && error.data?.code === 'PAYMENT_REQUIRED';
  return { outcome: declined ? 'declined' : 'failed', message: reason ? `${reason}: ${message}` : message };
}

export function PaymentsPage(props: {
  mode: FaultMode;
  onModeChange: (mode: FaultMode) => void;
  network: ReadonlyMap<string, NetworkAttempt[]>;
  pendingCalls: PendingCallsLink<AppRouter>;
  storeName: string;
  reloading: boolean;
  onReloadWhileLost: () => void;
}) {
  const trpc = useTRPC();
  const trpcClient = useTRPCClient();
  const queryClient = useQueryClient();
  const ledger = useQuery(trpc.payments.ledger.queryOptions({ limit: 20 }, { refetchInterval: 4_000 }));
  const refreshLedger = () => void queryClient.invalidateQueries(trpc.payments.ledger.queryFilter());

  const [submissions, setSubmissions] = useState<Submission[]>([]);
  const ids = useRef(new WeakMap<IdempotencyCallInfo, number>());
  const nextId = useRef(1);
  const [amount, setAmount] = useState('12.50');
  const [description, setDescription] = useState('Coffee beans');
  const [last, setLast] = useState<Submission | null>(null);

  // One key per user action: double submits and "try again" reuse it, a definitive answer spends it.
  const pay = useIdempotentMutation(trpc.payments.create.mutationOptions({ onSettled: refreshLedger }), {
    onCallStart: (call) => {
      const id = nextId.current++;
      ids.current.set(call.info, id);
      const row: Submission = {
        id,
        key: call.key,
        amountCents: call.variables.amountCents,
        description: call.variables.description,
        via: call.earlier ? 'earlier' : 'submit',
        attempts: 0,
        replayed: false,
        outcome: 'pending',
      };
      setSubmissions((previous) => [row, ...previous]);
      if (!call.earlier) setLast((previous) => (previous ? { ...previous, key: call.key } : previous));
    },
    onCallSettled: (call) => {
      const id = ids.current.get(call.info);
      const patch = { attempts: call.info.attempts, replayed: call.info.replayed, ...outcomeOf(call) };
      setSubmissions((previous) => previous.map((row) => (row.id === id ? { ...row, ...patch } : row)));
      if (!call.earlier) setLast((previous) => ({ ...(previous as Submission), ...patch, key: call.key }));
    },
  });

  const resume = useResumePendingCalls(props.pendingCalls, trpcClient, { onResumed: refreshLedger });

  const input = (): PaymentInput | null => {
    const amountCents = parseAmount(amount);
    return amountCents === null || description.trim() === '' ? null : { amountCents, description: description.trim() };
  };

  function submit(copies: 1 | 2) {
    const variables = input();
    if (!variables) return;
    setLast({ ...variables, id: 0, key: '', via: 'submit', attempts: 0, replayed: false, outcome: 'pending' });
    pay.mutate(variables, {
      onError: (error) => {
        // Nothing was sent for this input: the earlier banner asks (not confirmed), or the status says why (unknown).
        if (error instanceof NewInputNotConfirmedError) setLast(null);
        if (error instanceof EarlierOutcomeUnknownError) {
          setLast((previous) => previous && { ...previous, outcome: 'failed', message: error.message });
        }
      },
    });
    // The second copy leaves 20 ms later as its own HTTP request, while the first is in flight: same key.
    if (copies === 2) setTimeout(() => pay.mutate(variables), 20);
  }

  return (
    <main>
      <header>
        <h1>Exactly-once payments on a flaky network</h1>
        <p>
          Every payment carries an <code>Idempotency-Key</code>, one per user action (<code>useIdempotentMutation</code>
          ). The client retries through lost answers, timeouts, 503s and 409s with the same key; the server runs the
          payment once and replays its result. A payment whose answer never came is kept in {props.storeName} and
          resumed, with its key, on the next visit.
        </p>
      </header>
      <ResumeBanners resuming={resume.resuming} resumed={resume.resumed} onDismiss={resume.dismiss} />
      {pay.idempotency.earlier && (
        <p
          className={`banner ${pay.idempotency.earlier.status}`}
          data-testid="earlier-banner"
          data-status={pay.idempotency.earlier.status}
          data-key={pay.idempotency.earlier.key}
        >
          Your earlier payment of {formatCents(pay.idempotency.earlier.variables.amountCents)} (
          {pay.idempotency.earlier.variables.description}){' '}
          {pay.idempotency.earlier.status === 'succeeded'
            ? `went through (#${pay.idempotency.earlier.data.id}).`
            : 'did not go through; the changed one was sent on its own.'}
          {pay.error instanceof NewInputNotConfirmedError && (
            <>
              {' '}
              The changed one was not sent.{' '}
              <button type="button" onClick={() => submit(1)} data-testid="pay-as-well">
                Pay {formatCents(pay.error.variables.amountCents)} as well
              </button>
            </>
          )}
        </p>
      )}
      {props.reloading && (
        <p className="banner unknown" data-testid="reloading">
          The answer was lost after the server committed. Reloading the page now…
        </p>
      )}
      <div className="grid">
        <div className="column">
          <section className="card">
            <h2>New payment</h2>
            <form
              onSubmit={(event) => {
                event.preventDefault();
                submit(1);
              }}
            >
              <label>
                Amount (USD)
                <input
                  name="amount"
                  inputMode="decimal"
                  value={amount}
                  onChange={(event) => setAmount(event.target.value)}
                  aria-invalid={parseAmount(amount) === null}
                  data-testid="amount"
                />
              </label>
              <label>
                Description
                <input
                  name="description"
                  value={description}
                  maxLength={140}
                  onChange={(event) => setDescription(event.target.value)}
                  data-testid="description"
                />
              </label>
              <p className="hint small">
                This action&apos;s key:{' '}
                <code data-testid="form-key">{pay.idempotency.key ?? 'a new one on the next Pay'}</code>
              </p>
              <div className="buttons">
                <button type="submit" disabled={input() === null} data-testid="pay">
                  Pay
                </button>
                <button
                  type="button"
                  className="secondary"
                  disabled={input() === null}
                  onClick={() => submit(2)}
                  data-testid="pay-twice"
                  title="The same submission sent twice at once, like a double click"
                >
                  Double submit
                </button>
              </div>
              <PayStatus last={last} onTryAgain={() => submit(1)} />
              <div className="buttons">
                <button
                  type="button"
                  className="secondary"
                  disabled={input() === null || props.reloading}
                  onClick={() => {
                    props.onReloadWhileLost();
                    submit(1);
                  }}
                  data-testid="reload-lost"
                  title="Pays with every answer lost, then reloads the page before any answer arrives"
                >
                  Pay, then reload while the answer is lost
                </button>
              </div>
              <p className="hint small">
                Amounts over $5,000.00 are declined; the decline is stored and replayed too. Until answered, a payment
                (key, amount, description) is kept in {props.storeName}.
              </p>
            </form>
          </section>
          <NetworkControl mode={props.mode} onChange={props.onModeChange} />
        </div>
        <Ledger ledger={ledger.data ?? null} error={ledger.error?.message ?? null} />
      </div>
      <Submissions submissions={submissions} network={props.network} />
    </main>
  );
}
