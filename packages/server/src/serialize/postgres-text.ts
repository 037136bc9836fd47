// A code unit of a surrogate pair that has no partner: UTF-8 cannot encode it.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// ES2024's native check (Node 20+, current browsers and edge runtimes) answers the common case without the regex.
const nativeIsWellFormed = (String.prototype as { isWellFormed?: (this: string) => boolean }).isWellFormed;

/**
 * Why Postgres `text` cannot hold `value` exactly, or undefined when it can. Postgres text is UTF-8 without NUL:
 * the drivers (pg, PGlite) encode a lone surrogate as U+FFFD, so `'\uD800'`, `'\uDFFF'` and `'\uFFFD'` would be one
 * stored value while JavaScript compares three; and NUL is rejected outright.
 */
export function postgresTextProblem(value: string): string | undefined {
  const nul = value.indexOf('\u0000');
  if (nul >= 0) return `contains the NUL character at index ${nul}`;
  if (nativeIsWellFormed?.call(value)) return undefined;
  const lone = LONE_SURROGATE.exec(value);
  if (lone) {
    const hex = lone[0].charCodeAt(0).toString(16).toUpperCase();
    return `is not well-formed UTF-16: lone surrogate U+${hex} at index ${lone.index}`;
  }
  return undefined;
}
