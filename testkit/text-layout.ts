/**
 * Terminal layout of the demos' reports (npm start, npm run demo:fast-fail): paragraphs and a table that fit a width (100 columns, what
 * a terminal beside an editor shows), wrapping at spaces. A word longer than the width is kept
 * whole (it overflows rather than being cut). A no-break space (NBSP) joins words that must stay on
 * one line (a number and its unit); it is printed as a plain space.
 */

const NBSP = '\u00a0';
/** Binds each number to the unit after it ("600 s", "+0.5 %"), so that a wrap never parts them. */
export const keepUnits = (s: string): string => s.replace(/(\d) (ms|s|min|%)(?=\W|$)/g, `$1${NBSP}$2`);
const plain = (s: string): string => s.replaceAll(NBSP, ' ');

export const REPORT_COLUMNS = 100;

/** Words of `text` in lines of at most `width` characters; every line after the first starts with `hang`. */
export function wrap(text: string, width: number, hang = ''): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/[ \t\n]+/).filter((w) => w !== '')) {
    const prefix = lines.length === 0 ? '' : hang;
    if (line === '') line = `${prefix}${word}`;
    else if (line.length + 1 + word.length <= width) line = `${line} ${word}`;
    else {
      lines.push(line);
      line = `${hang}${word}`;
    }
  }
  if (line !== '' || lines.length === 0) lines.push(line);
  return lines.map(plain);
}

/**
 * `first` then `text`, wrapped to `width`; later lines start with `hang` (by default as wide as
 * `first`, so that they line up after it; a list item passes its marker's indent).
 */
export function paragraph(first: string, text: string, width: number = REPORT_COLUMNS, hang: string = ' '.repeat(first.length)): string[] {
  const lines = wrap(text, width - first.length);
  if (lines.length === 1) return [`${first}${lines[0]}`];
  // Re-wrap what follows the first line at the hang's indent.
  const rest = wrap(lines.slice(1).join(' '), width - hang.length);
  return [`${first}${lines[0]}`, ...rest.map((l) => `${hang}${l}`)];
}

const longestWord = (s: string): number => Math.max(0, ...s.split(/[ \t\n]+/).map((w) => w.length));

/**
 * A pipe table no wider than `width`: the widest columns give way first, down to their longest
 * word; cells wrap at spaces. Rows that wrap are separated by a rule so that each reads as one.
 */
export function fitTable(header: readonly string[], rows: readonly (readonly string[])[], width: number = REPORT_COLUMNS): string {
  // Columns start as wide as their widest cell, headers counted by their longest word (a header
  // wraps before a value does); the widest give way first, down to their longest word, and columns
  // whose header wrapped take back what room is left.
  const all = [header, ...rows];
  const widths = header.map((h, i) => Math.max(longestWord(h), ...rows.map((r) => (r[i] ?? '').length)));
  const floor = header.map((_, i) => Math.max(1, ...all.map((r) => longestWord(r[i] ?? ''))));
  const total = () => widths.reduce((a, b) => a + b, 0) + 3 * widths.length + 1;
  while (total() > width) {
    let widest = -1;
    for (let i = 0; i < widths.length; i++) {
      if ((widths[i] ?? 0) > (floor[i] ?? 0) && (widest === -1 || (widths[i] ?? 0) > (widths[widest] ?? 0))) widest = i;
    }
    if (widest === -1) break; // every column at its longest word
    widths[widest] = (widths[widest] ?? 0) - 1;
  }
  for (let grew = true; grew && total() < width; ) {
    grew = false;
    for (let i = 0; i < widths.length && total() < width; i++) {
      if ((widths[i] ?? 0) < (header[i] ?? '').length) {
        widths[i] = (widths[i] ?? 0) + 1;
        grew = true;
      }
    }
  }
  const render = (cells: readonly string[]): string[] => {
    const wrapped = widths.map((w, i) => wrap(cells[i] ?? '', w));
    const height = Math.max(...wrapped.map((c) => c.length));
    return Array.from({ length: height }, (_, k) => `| ${wrapped.map((c, i) => (c[k] ?? '').padEnd(widths[i] ?? 0)).join(' | ')} |`);
  };
  const rule = `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`;
  const body = rows.map(render);
  const anyWraps = body.some((r) => r.length > 1);
  return [...render(header), rule, ...body.flatMap((r, i) => (anyWraps && i > 0 ? [rule, ...r] : r))].join('\n');
}
