import type { Metadata } from 'next';
import type { ReactNode } from 'react';
import './globals.css';

export const metadata: Metadata = {
  title: 'trpc-idempotency demo: exactly-once payments on a flaky network',
  description: 'Retry a tRPC mutation as often as the network needs; the customer is charged once.',
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  );
}
