import { createServer, type Server } from 'node:http';

/** One charge the simulated provider carried out. */
export interface Charge {
  chargeId: string;
  ref: string;
  key: string | undefined;
}

/**
 * A simulated payment provider on 127.0.0.1, run in the test process so it outlives killed servers.
 * `POST /charge` with `{ ref, key? }`: a keyed charge is deduplicated by its key across every caller, as Stripe
 * treats an `Idempotency-Key` per merchant account (the app sends `ctx.idempotency.downstreamKey()`); an unkeyed one
 * is carried out every time it is asked.
 */
export class PaymentProvider {
  /** Every charge actually carried out. */
  readonly charges: Charge[] = [];
  /** Calls received, deduplicated or not. */
  calls = 0;
  private readonly byKey = new Map<string, Charge>();
  private readonly server: Server;
  private portNumber = 0;

  constructor() {
    this.server = createServer((req, res) => {
      if (req.method === 'GET') {
        // The ledger, for a test whose provider runs in a process of its own (provider-main.ts).
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ charges: this.charges, calls: this.calls }));
        return;
      }
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => {
        body += c;
      });
      req.on('end', () => {
        this.calls++;
        const { ref, key } = JSON.parse(body) as { ref: string; key?: string };
        let charge = key === undefined ? undefined : this.byKey.get(key);
        if (!charge) {
          charge = { chargeId: `ch_${this.charges.length + 1}`, ref, key };
          this.charges.push(charge);
          if (key !== undefined) this.byKey.set(key, charge);
        }
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ chargeId: charge.chargeId }));
      });
    });
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    const address = this.server.address();
    this.portNumber = typeof address === 'object' && address ? address.port : 0;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.portNumber}`;
  }

  /** Charges carried out per payment ref, split into keyed and unkeyed. */
  chargesPerRef(): Map<string, { keyed: number; unkeyed: number }> {
    const out = new Map<string, { keyed: number; unkeyed: number }>();
    for (const c of this.charges) {
      const entry = out.get(c.ref) ?? { keyed: 0, unkeyed: 0 };
      if (c.key === undefined) entry.unkeyed++;
      else entry.keyed++;
      out.set(c.ref, entry);
    }
    return out;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
