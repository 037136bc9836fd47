'use client';

import { TRPCClientError } from '@trpc/client';
import type { IdempotencyCallInfo } from '@trpc-idempotency/client';
import { getIdempotencyReason } from '@trpc-idempotency/client';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { createDemoClient } from '@/client/createDemoClient';
import type { FaultMode } from '@/network/faultModes';
import { flakyFetch, type NetworkAttempt } from '@/network/flakyFetch';
import { parseAmount } from './format';
import { Ledger, type LedgerView } from './Ledger';
import { NetworkControl } from './NetworkControl';
import { type Submission, Submissions } from './Submissions';

function newKey(): string {
  return crypto.randomUUID();
}

/** A server answer that settles the submission for good: its key is spent, the next submission needs a new one. */
function isDefinitive(outcome: Submission['outcome']): boolean {
  return outcome === 'charged' || outcome === 'declined';
}

export function PaymentsApp() {
  const [mode, setMode] = useState<FaultMode>('off');
  const modeRef = useRef(mode);
  modeRef.current = mode;

  const [network, setNetwork] = useState<ReadonlyMap<string, NetworkAttempt[]>>(new Map());
  const [submissions, setSubmissions] = useState<Submission[]>([]);
  const [ledger, setLedger] = useState<LedgerView | null>(null);
  const [ledgerError, setLedgerError] = useState<string | null>(null);
  const [amount, setAmount] = useState('12.50');
  const [description, setDescription] = useState('Coffee beans');
  // One form submission keeps one key, across retries, double clicks and "try again", until the server answers.
  // Made in the browser after hydration: the page is prerendered, and a key baked into its HTML would be shared.
  const [formKey, setFormKey] = useState<string | null>(null);
  useEffect(() => setFormKey((current) => current ?? newKey()), []);
  const nextId = useRef(1);

  const client = useMemo(
    () =>
      createDemoClient({
        url: '/api/trpc',
        fetch: flakyFetch({
          mode: () => modeRef.current,
          onAttempt: (attempt) =>
            setNetwork((previous) => {
              const next = new Map(previous);
              // A batch may carry the same key twice (a double submit): one request, one entry.
              for (const key of new Set(attempt.keys)) next.set(key, [...(next.get(key) ?? []), attempt]);
              return next;
            }),
        }),
      }),
    [],
  );

  const refreshLedger = useCallback(async () => {
    try {
      setLedger(await client.payments.ledger.query({ limit: 20 }));
      setLedgerError(null);
    } catch (error) {
      // The next poll tries again: queries pass the idempotency link untouched and are never retried by it.
      setLedgerError(error instanceof Error ? error.message : String(error));
    }
  }, [client]);

  useEffect(() => {
    void refreshLedger();
    const timer = setInterval(refreshLedger, 4_000);
    return () => clearInterval(timer);
  }, [refreshLedger]);

  const update = (id: number, patch: Partial<Submission>) =>
    setSubmissions((previous) => previous.map((entry) => (entry.id === id ? { ...entry, ...patch } : entry)));

  async function send(key: string, amountCents: number, text: string, via: Submission['via']) {
    const id = nextId.current++;
    setSubmissions((previous) => [
      { id, key, amountCents, description: text, via, attempts: 0, replayed: false, outcome: 'pending' },
      ...previous,
    ]);
    const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
    let outcome: Submission['outcome'];
    try {
      const payment = await client.payments.create.mutate(
        { amountCents, description: text },
        { context: { idempotencyKey: key, idempotencyInfo: info } },
      );
      outcome = 'charged';
      update(id, { outcome, paymentId: payment.id, attempts: info.attempts, replayed: info.replayed });
    } catch (error) {
      const declined = error instanceof TRPCClientError && error.data?.code === 'PAYMENT_REQUIRED';
      const reason = getIdempotencyReason(error);
      outcome = declined ? 'declined' : 'failed';
      const message = error instanceof Error ? error.message : String(error);
      update(id, {
        outcome,
        attempts: info.attempts,
        replayed: info.replayed,
        message: reason ? `${reason}: ${message}` : message,
      });
    }
    void refreshLedger();
    return outcome;
  }

  async function submit(copies: 1 | 2) {
    const amountCents = parseAmount(amount);
    if (amountCents === null || description.trim() === '' || formKey === null) return;
    const key = formKey;
    const vias: Submission['via'][] = copies === 1 ? ['submit'] : ['double-1', 'double-2'];
    // The second copy leaves 20 ms later, as its own HTTP request (two tabs never share a batch), while the
    // first is still in flight.
    const outcomes = await Promise.all(
      vias.map(async (via, index) => {
        if (index > 0) await new Promise((resolve) => setTimeout(resolve, 20));
        return send(key, amountCents, description.trim(), via);
      }),
    );
    // Only a definitive answer spends the key; after a failure, "Pay" again resends the same key.
    if (outcomes.some(isDefinitive)) setFormKey((current) => (current === key ? newKey() : current));
  }

  const canPay = parseAmount(amount) !== null && formKey !== null;
  return (
    <main>
      <header>
        <h1>Exactly-once payments on a flaky network</h1>
        <p>
          Every payment carries an <code>Idempotency-Key</code>. The client retries through lost answers, timeouts, 503s
          and 409s with the same key; the server runs the payment once and replays its result.
        </p>
      </header>
      <div className="grid">
        <div className="column">
          <section className="card">
            <h2>New payment</h2>
            <form
              onSubmit={(event) => {
                event.preventDefault();
                void submit(1);
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
                This submission&apos;s key: <code data-testid="form-key">{formKey ?? '…'}</code>
              </p>
              <div className="buttons">
                <button type="submit" disabled={!canPay} data-testid="pay">
                  Pay
                </button>
                <button
                  type="button"
                  className="secondary"
                  disabled={!canPay}
                  onClick={() => void submit(2)}
                  data-testid="pay-twice"
                  title="The same submission sent twice at once, like a double click or the same form in two tabs"
                >
                  Double-click / two tabs
                </button>
              </div>
              <p className="hint small">Amounts over $5,000.00 are declined; the decline is stored and replayed too.</p>
            </form>
          </section>
          <NetworkControl mode={mode} onChange={setMode} />
        </div>
        <Ledger ledger={ledger} error={ledgerError} />
      </div>
      <Submissions submissions={submissions} network={network} />
    </main>
  );
}
