/**
 * The simulated payment provider as a process of its own (a separate ledger, outliving every server it serves):
 * prints `{ "port": … }` once it listens. `GET /` answers its ledger (see PaymentProvider).
 */
import { PaymentProvider } from './payment-provider.ts';

const provider = await new PaymentProvider().listen();
process.stdout.write(`${JSON.stringify({ port: Number(new URL(provider.url).port) })}\n`);
