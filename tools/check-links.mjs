// Checks every relative link and anchor in the repository's Markdown files: a link to a file that does not exist,
// or to a heading that no longer exists, fails `npm test` before anything else is built. External links are not
// fetched (the tests run offline).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(dirname(new URL(import.meta.url).pathname), '..');
const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'], {
  cwd: root,
  encoding: 'utf8',
})
  .split('\n')
  .filter((f) => f && !f.includes('node_modules/') && existsSync(join(root, f)));

/** The lines outside fenced code blocks, with inline code removed (a link inside code is not a link). */
function prose(text) {
  let fenced = false;
  return text.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line.replace(/`[^`]*`/g, '');
  });
}

/** GitHub's anchors for a file's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
const anchorCache = new Map();
function anchors(file) {
  if (anchorCache.has(file)) return anchorCache.get(file);
  const seen = new Map();
  const found = new Set();
  let fenced = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const text = heading[1]
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .toLowerCase();
    const slug = text.replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    found.add(n === 0 ? slug : `${slug}-${n}`);
  }
  for (const m of readFileSync(file, 'utf8').matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) found.add(m[1]);
  anchorCache.set(file, found);
  return found;
}

const broken = [];
for (const file of files) {
  const path = join(root, file);
  prose(readFileSync(path, 'utf8')).forEach((line, i) => {
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      const [pathPart, anchor] = target.split('#');
      const targetPath = pathPart ? resolve(dirname(path), decodeURIComponent(pathPart)) : path;
      const where = `${file}:${i + 1}: ${target}`;
      if (!existsSync(targetPath)) {
        broken.push(`${where} (no such file)`);
        continue;
      }
      if (anchor && statSync(targetPath).isFile() && targetPath.endsWith('.md')) {
        if (!anchors(targetPath).has(decodeURIComponent(anchor).toLowerCase())) {
          broken.push(`${where} (no heading #${anchor} in ${relative(root, targetPath)})`);
        }
      }
    }
  });
}

if (broken.length) {
  console.error(`Broken Markdown links (${broken.length}):\n${broken.join('\n')}`);
  process.exit(1);
}
console.log(`Markdown links: ${files.length} files checked, no broken link.`);
