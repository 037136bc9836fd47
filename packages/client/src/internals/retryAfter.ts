/**
 * Reads a `Retry-After` header: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
 * Returns milliseconds from `now`, never negative; `undefined` when absent or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | undefined {
  if (value == null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) {
    // Hundreds of digits overflow to Infinity: unreadable, not a wait that never ends.
    const ms = Number(trimmed) * 1000;
    return Number.isFinite(ms) ? ms : undefined;
  }
  const at = parseHttpDate(trimmed);
  return at === undefined ? undefined : Math.max(0, at - now);
}

const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY = '(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)';
const MONTH = '(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '\\d{2}:\\d{2}:\\d{2}';
/** IMF-fixdate, and the two obsolete forms RFC 9110 §5.6.7 has recipients accept (RFC 850, asctime). */
const IMF_FIXDATE = new RegExp(`^${DAY}, \\d{2} ${MONTH} \\d{4} ${TIME} GMT$`);
const RFC_850 = new RegExp(`^${LONG_DAY}, \\d{2}-${MONTH}-\\d{2} ${TIME} GMT$`);
const ASCTIME = new RegExp(`^${DAY} ${MONTH} [ \\d]\\d ${TIME} \\d{4}$`);

/**
 * An HTTP-date in ms since the epoch, or `undefined` for any other text: `Date.parse` also takes ISO dates, bare
 * numbers and local times, which a server did not mean as one instant everywhere.
 */
function parseHttpDate(text: string): number | undefined {
  let at = Number.NaN;
  if (IMF_FIXDATE.test(text) || RFC_850.test(text)) at = Date.parse(text);
  // asctime carries no zone but means GMT; Date.parse would read it in the device's zone.
  else if (ASCTIME.test(text)) at = Date.parse(`${text} GMT`);
  return Number.isNaN(at) ? undefined : at;
}
