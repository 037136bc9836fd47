'use client';

import { formatCents, shortKey } from './format';

export interface LedgerView {
  payments: { id: number; amountCents: number; description: string; key: string; createdAt: Date }[];
  rows: number;
  distinctKeys: number;
  duplicates: number;
  totalCents: number;
  database: string;
}

export function Ledger({ ledger, error }: { ledger: LedgerView | null; error: string | null }) {
  return (
    <section className="card">
      <h2>Ledger</h2>
      {error && <p className="hint error">Could not load the ledger: {error}</p>}
      {ledger === null ? (
        <p className="hint">Loading…</p>
      ) : (
        <>
          <div className="totals">
            <div>
              <span className="label">Payments</span>
              <strong data-testid="ledger-rows">{ledger.rows}</strong>
            </div>
            <div>
              <span className="label">Charged</span>
              <strong data-testid="ledger-total">{formatCents(ledger.totalCents)}</strong>
            </div>
            <div className={ledger.duplicates === 0 ? 'ok' : 'bad'}>
              <span className="label">Charged twice</span>
              <strong data-testid="ledger-duplicates">{ledger.duplicates}</strong>
            </div>
          </div>
          <table>
            <thead>
              <tr>
                <th>#</th>
                <th>Description</th>
                <th className="num">Amount</th>
                <th>Idempotency key</th>
                <th>At</th>
              </tr>
            </thead>
            <tbody data-testid="ledger-body">
              {ledger.payments.map((payment) => (
                <tr key={payment.id}>
                  <td>{payment.id}</td>
                  <td>{payment.description}</td>
                  <td className="num">{formatCents(payment.amountCents)}</td>
                  <td>
                    <code title={payment.key}>{shortKey(payment.key)}</code>
                  </td>
                  <td>{payment.createdAt.toLocaleTimeString()}</td>
                </tr>
              ))}
              {ledger.payments.length === 0 && (
                <tr>
                  <td colSpan={5} className="hint">
                    No payments yet.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
          <p className="hint small">Stored in {ledger.database}</p>
        </>
      )}
    </section>
  );
}
