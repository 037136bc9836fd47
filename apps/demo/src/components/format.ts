const money = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' });

export function formatCents(cents: number): string {
  return money.format(cents / 100);
}

/** "12.5" → 1250; anything that is not a positive amount with at most two decimals → null. */
export function parseAmount(text: string): number | null {
  const match = /^\s*(\d{1,7})(?:[.,](\d{1,2}))?\s*$/.exec(text);
  if (!match) return null;
  const cents = Number(match[1]) * 100 + Number((match[2] ?? '').padEnd(2, '0'));
  return cents > 0 ? cents : null;
}

export function shortKey(key: string): string {
  return key.length > 13 ? `${key.slice(0, 8)}…${key.slice(-4)}` : key;
}
