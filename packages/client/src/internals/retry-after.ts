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
  const at = parseHttpDate(trimmed, now);
  return at === undefined ? undefined : Math.max(0, at - now);
}

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const LONG_DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
const MONTH = `(${MONTHS.join('|')})`;
/** IMF-fixdate, and the two obsolete forms RFC 9110 §5.6.7 has recipients accept (RFC 850, asctime). */
const IMF_FIXDATE = new RegExp(`^(${DAYS.join('|')}), (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
const RFC_850 = new RegExp(`^(${LONG_DAYS.join('|')}), (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
const ASCTIME = new RegExp(`^(${DAYS.join('|')}) ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

type DateFields = [weekday: number, day: string, month: string, year: number, h: string, m: string, s: string];

/** The fields of an HTTP-date in any of its three forms, or `undefined` for any other text. */
function fieldsOf(text: string, now: number): DateFields | undefined {
  const imf = IMF_FIXDATE.exec(text);
  if (imf) {
    const [, wd, d, mo, y, h, mi, se] = imf as unknown as string[];
    return [DAYS.indexOf(wd!), d!, mo!, Number(y), h!, mi!, se!];
  }
  const rfc850 = RFC_850.exec(text);
  if (rfc850) {
    const [, wd, d, mo, yy, h, mi, se] = rfc850 as unknown as string[];
    // A two-digit year more than 50 years ahead is the most recent past year with those digits (RFC 9110).
    const thisYear = new Date(now).getUTCFullYear();
    let year = thisYear - (thisYear % 100) + Number(yy);
    if (year > thisYear + 50) year -= 100;
    return [LONG_DAYS.indexOf(wd!), d!, mo!, year, h!, mi!, se!];
  }
  const asctime = ASCTIME.exec(text);
  if (asctime) {
    const [, wd, mo, d, h, mi, se, y] = asctime as unknown as string[];
    return [DAYS.indexOf(wd!), d!.trim(), mo!, Number(y), h!, mi!, se!];
  }
  return undefined;
}

/**
 * An HTTP-date in ms since the epoch, or `undefined` for any other text. `Date.parse` also takes ISO dates, bare
 * numbers and local times, and rolls 31 Feb over into March: a date is read here only when every field is its own
 * (asctime carries no zone and means GMT).
 */
function parseHttpDate(text: string, now: number): number | undefined {
  const fields = fieldsOf(text, now);
  if (!fields) return undefined;
  const [weekday, day, month, year, hours, minutes, seconds] = fields;
  const at = new Date(0);
  at.setUTCFullYear(year, MONTHS.indexOf(month), Number(day));
  at.setUTCHours(Number(hours), Number(minutes), Number(seconds), 0);
  const own =
    at.getUTCFullYear() === year &&
    at.getUTCMonth() === MONTHS.indexOf(month) &&
    at.getUTCDate() === Number(day) &&
    at.getUTCHours() === Number(hours) &&
    at.getUTCMinutes() === Number(minutes) &&
    at.getUTCSeconds() === Number(seconds) &&
    at.getUTCDay() === weekday;
  return own ? at.getTime() : undefined;
}
