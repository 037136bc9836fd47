import { type Dirent, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

/** The formatter's width. Biome wraps code to it but leaves comments and long strings as they are: this checks all. */
export const MAX_COLUMNS = 120;

const SOURCE = /\.(?:[cm]?[jt]s|tsx|jsx)$/;

/** One line of a package's source past `MAX_COLUMNS`. */
export interface LongLine {
  /** The file, relative to the repository, with `/` separators. */
  file: string;
  line: number;
  columns: number;
}

/**
 * Every line past `MAX_COLUMNS` in the `src/` folders of the repository's `packages/*`, counted in code points (a
 * `—` or `µ` is one column).
 */
export function findLongLines(root: string): LongLine[] {
  const packages = join(root, 'packages');
  const found: LongLine[] = [];
  for (const entry of byName(readdirSync(packages, { withFileTypes: true }))) {
    const src = join(packages, entry.name, 'src');
    if (!entry.isDirectory() || !existsSync(src)) continue;
    for (const path of sourceFiles(src)) {
      const file = relative(root, path).split(sep).join('/');
      readFileSync(path, 'utf8')
        .split(/\r?\n/)
        .forEach((text, index) => {
          const columns = [...text].length;
          if (columns > MAX_COLUMNS) found.push({ file, line: index + 1, columns });
        });
    }
  }
  return found;
}

function sourceFiles(dir: string): string[] {
  return byName(readdirSync(dir, { withFileTypes: true })).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(path);
    return entry.isFile() && SOURCE.test(entry.name) ? [path] : [];
  });
}

/** Directory order differs between file systems: the report is sorted by path. */
function byName(entries: Dirent[]): Dirent[] {
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
