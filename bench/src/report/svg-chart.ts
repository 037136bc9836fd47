import type { Spread } from '../load/stats.ts';

export interface ChartSeries {
  label: string;
  color: string;
}

export interface ChartGroup {
  title: string;
  /** One bar per series, per contender; `undefined` leaves the slot empty. */
  rows: { contender: string; values: (Spread | undefined)[] }[];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Horizontal bar chart of throughput ratios to plain: a bar per median, a whisker from the smallest to the
 * largest per-round ratio, and a line at 1.0×. Plain SVG text, no chart dependency.
 */
export function ratioChart(title: string, series: ChartSeries[], groups: ChartGroup[]): string {
  const left = 150;
  const width = 640;
  const plotWidth = width - left - 60;
  const barHeight = 11;
  const rowGap = 8;
  const all = groups.flatMap((g) => g.rows.flatMap((r) => r.values.filter((v): v is Spread => !!v)));
  const maxValue = Math.max(
    1.2,
    ...all.map((v) => (Number.isFinite(v.max) ? v.max : v.median)).filter(Number.isFinite),
  );
  const scale = Math.ceil(maxValue * 2) / 2;
  const x = (v: number) => left + (Math.min(v, scale) / scale) * plotWidth;
  const out: string[] = [];
  let y = 50;
  for (const group of groups) {
    out.push(`<text x="10" y="${y}" font-weight="bold">${esc(group.title)}</text>`);
    y += 10;
    const top = y;
    for (const row of group.rows) {
      const rowHeight = series.length * barHeight;
      out.push(`<text x="${left - 6}" y="${y + rowHeight / 2 + 4}" text-anchor="end">${esc(row.contender)}</text>`);
      row.values.forEach((v, i) => {
        const by = y + i * barHeight;
        if (!v || !Number.isFinite(v.median)) return;
        out.push(
          `<rect x="${left}" y="${by + 1}" width="${(x(v.median) - left).toFixed(1)}" height="${barHeight - 2}" fill="${series[i]!.color}"/>`,
        );
        if (Number.isFinite(v.min) && Number.isFinite(v.max)) {
          const cy = by + barHeight / 2;
          out.push(
            `<line x1="${x(v.min).toFixed(1)}" y1="${cy}" x2="${x(v.max).toFixed(1)}" y2="${cy}" stroke="#333" stroke-width="1"/>`,
          );
        }
        out.push(
          `<text x="${(x(Math.max(v.median, Number.isFinite(v.max) ? v.max : v.median)) + 4).toFixed(1)}" y="${by + barHeight - 2}" font-size="9">${v.median.toFixed(2)}×</text>`,
        );
      });
      y += rowHeight + rowGap;
    }
    out.push(
      `<line x1="${x(1)}" y1="${top - 4}" x2="${x(1)}" y2="${y - rowGap + 2}" stroke="#c00" stroke-dasharray="3,2"/>`,
    );
    y += 16;
  }
  const ticks: string[] = [];
  for (let v = 0; v <= scale + 1e-9; v += 0.5) {
    ticks.push(`<text x="${x(v)}" y="${y}" text-anchor="middle" font-size="9">${v.toFixed(1)}×</text>`);
  }
  y += 14;
  const legend = series
    .map(
      (s, i) =>
        `<rect x="${left + i * 150}" y="${y}" width="10" height="10" fill="${s.color}"/><text x="${left + i * 150 + 14}" y="${y + 9}">${esc(s.label)}</text>`,
    )
    .join('');
  y += 24;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="22" font-size="14" font-weight="bold">${esc(title)}</text>`,
    `<text x="10" y="38" font-size="10" fill="#555">bar: median of per-round ratios; whisker: min–max over rounds; dashed: plain = 1.0×</text>`,
    ...out,
    ...ticks,
    legend,
    '</svg>',
    '',
  ].join('\n');
}
