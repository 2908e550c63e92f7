/**
 * Label and field selectors: a port of k8s.io/apimachinery/pkg/labels (lexer + recursive
 * descent parser, same error texts) and pkg/fields (term splitting and escaping).
 */
import { isQualifiedName, isValidLabelValue } from './names.ts';
import { goQuote } from './status.ts';

export type LabelOperator = 'in' | 'notin' | '=' | '==' | '!=' | 'exists' | '!' | 'gt' | 'lt';

export interface Requirement {
  readonly key: string;
  readonly operator: LabelOperator;
  readonly values: readonly string[];
}

export interface LabelSelector {
  readonly requirements: readonly Requirement[];
}

/** Thrown for any selector the real server would reject with 400 BadRequest. */
export class SelectorError extends Error {
  override name = 'SelectorError';
}

// ---- lexer ------------------------------------------------------------------------------

type Tok =
  | 'error'
  | 'eos'
  | 'closedPar'
  | 'comma'
  | 'doesNotExist'
  | 'doubleEquals'
  | 'equals'
  | 'gt'
  | 'identifier'
  | 'in'
  | 'lt'
  | 'notEquals'
  | 'notIn'
  | 'openPar';

const STRING_TO_TOKEN: ReadonlyMap<string, Tok> = new Map<string, Tok>([
  [')', 'closedPar'],
  [',', 'comma'],
  ['!', 'doesNotExist'],
  ['==', 'doubleEquals'],
  ['=', 'equals'],
  ['>', 'gt'],
  ['in', 'in'],
  ['<', 'lt'],
  ['!=', 'notEquals'],
  ['notin', 'notIn'],
  ['(', 'openPar'],
]);

interface Item {
  tok: Tok;
  lit: string;
}

const isWhitespace = (ch: string): boolean => ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n';
const isSpecial = (ch: string): boolean => '=!(),><'.includes(ch) && ch !== '';

function lex(input: string): Item[] {
  // The Go lexer works on bytes; selectors are ASCII in practice, so code units are fine.
  const items: Item[] = [];
  let pos = 0;
  const read = (): string => (pos < input.length ? (input[pos++] ?? '') : '');
  for (;;) {
    let ch = read();
    while (ch !== '' && isWhitespace(ch)) ch = read();
    if (ch === '') {
      items.push({ tok: 'eos', lit: '' });
      return items;
    }
    pos--;
    if (isSpecial(ch)) {
      let buffer = '';
      let last: Item | undefined;
      for (;;) {
        const c = read();
        if (c === '') break;
        if (isSpecial(c)) {
          buffer += c;
          const tok = STRING_TO_TOKEN.get(buffer);
          if (tok !== undefined) last = { tok, lit: buffer };
          else if (last !== undefined) {
            pos--;
            break;
          }
        } else {
          pos--;
          break;
        }
      }
      items.push(last ?? { tok: 'error', lit: `error expected: keyword found '${buffer}'` });
    } else {
      let buffer = '';
      for (;;) {
        const c = read();
        if (c === '') break;
        if (isSpecial(c) || isWhitespace(c)) {
          pos--;
          break;
        }
        buffer += c;
      }
      items.push({ tok: STRING_TO_TOKEN.get(buffer) ?? 'identifier', lit: buffer });
    }
  }
}

// ---- parser -----------------------------------------------------------------------------

const BINARY_OPERATORS = 'in, notin, =, ==, !=, gt, lt';

class Parser {
  private readonly items: Item[];
  private position = 0;

  constructor(input: string) {
    this.items = lex(input);
  }

  private at(offset: number, values: boolean): Item {
    const item = this.items[Math.min(offset, this.items.length - 1)] ?? { tok: 'eos', lit: '' };
    // In the values context the keywords are ordinary identifiers (e.g. "x in (in)").
    if (values && (item.tok === 'in' || item.tok === 'notIn')) return { tok: 'identifier', lit: item.lit };
    return item;
  }

  private lookahead(values = true): Item {
    return this.at(this.position, values);
  }

  private consume(values = true): Item {
    const item = this.at(this.position, values);
    this.position++;
    return item;
  }

  parse(): Requirement[] {
    const reqs: Requirement[] = [];
    for (;;) {
      const { tok, lit } = this.lookahead();
      if (tok === 'identifier' || tok === 'doesNotExist') {
        let r: Requirement;
        try {
          r = this.parseRequirement();
        } catch (e) {
          throw new SelectorError(`unable to parse requirement: ${(e as Error).message}`);
        }
        reqs.push(r);
        const next = this.consume();
        if (next.tok === 'eos') return reqs;
        if (next.tok === 'comma') {
          const t2 = this.lookahead();
          if (t2.tok !== 'identifier' && t2.tok !== 'doesNotExist')
            throw new SelectorError(`found '${t2.lit}', expected: identifier after ','`);
        } else {
          throw new SelectorError(`found '${next.lit}', expected: ',' or 'end of string'`);
        }
      } else if (tok === 'eos') {
        return reqs;
      } else {
        throw new SelectorError(`found '${lit}', expected: !, identifier, or 'end of string'`);
      }
    }
  }

  private parseRequirement(): Requirement {
    let item = this.consume();
    let operator: LabelOperator | undefined;
    if (item.tok === 'doesNotExist') {
      operator = '!';
      item = this.consume();
    }
    if (item.tok !== 'identifier') throw new Error(`found '${item.lit}', expected: identifier`);
    const key = item.lit;
    const keyErrs = isQualifiedName(key);
    if (keyErrs.length > 0) throw new Error(`<nil>: Invalid value: ${goQuote(key)}: ${keyErrs.join('; ')}`);
    const t = this.lookahead().tok;
    if (t === 'eos' || t === 'comma') return newRequirement(key, operator ?? 'exists', []);
    if (operator === '!') return newRequirement(key, '!', []);

    const opItem = this.consume(false);
    const opMap: Partial<Record<Tok, LabelOperator>> = {
      in: 'in',
      equals: '=',
      doubleEquals: '==',
      gt: 'gt',
      lt: 'lt',
      notIn: 'notin',
      notEquals: '!=',
    };
    const op = opMap[opItem.tok];
    if (op === undefined) throw new Error(`found '${opItem.lit}', expected: ${BINARY_OPERATORS}`);
    const values = op === 'in' || op === 'notin' ? this.parseValues() : this.parseExactValue();
    return newRequirement(key, op, [...values].sort());
  }

  private parseValues(): Set<string> {
    const open = this.consume();
    if (open.tok !== 'openPar') throw new Error(`found '${open.lit}' expected: '('`);
    const { tok, lit } = this.lookahead();
    if (tok === 'identifier' || tok === 'comma') {
      const s = this.parseIdentifiersList();
      if (this.consume().tok !== 'closedPar') throw new Error(`found '${lit}', expected: ')'`);
      return s;
    }
    if (tok === 'closedPar') {
      this.consume();
      return new Set(['']);
    }
    throw new Error(`found '${lit}', expected: ',', ')' or identifier`);
  }

  private parseIdentifiersList(): Set<string> {
    const s = new Set<string>();
    for (;;) {
      const { tok, lit } = this.consume();
      if (tok === 'identifier') {
        s.add(lit);
        const next = this.lookahead();
        if (next.tok === 'comma') continue;
        if (next.tok === 'closedPar') return s;
        throw new Error(`found '${next.lit}', expected: ',' or ')'`);
      } else if (tok === 'comma') {
        if (s.size === 0) s.add('');
        const next = this.lookahead().tok;
        if (next === 'closedPar') {
          s.add('');
          return s;
        }
        if (next === 'comma') s.add('');
      } else {
        throw new Error(`found '${lit}', expected: ',', or identifier`);
      }
    }
  }

  private parseExactValue(): Set<string> {
    const t = this.lookahead().tok;
    if (t === 'eos' || t === 'comma') return new Set(['']);
    const { tok, lit } = this.consume();
    if (tok === 'identifier') return new Set([lit]);
    throw new Error(`found '${lit}', expected: identifier`);
  }
}

/** labels.NewRequirement: validates and aggregates like the Go ErrorList. */
function newRequirement(key: string, operator: LabelOperator, values: string[]): Requirement {
  const errs: string[] = [];
  const keyErrs = isQualifiedName(key);
  if (keyErrs.length > 0) errs.push(`key: Invalid value: ${goQuote(key)}: ${keyErrs.join('; ')}`);
  const goValues = `[]string{${values.map(goQuote).join(', ')}}`;
  if ((operator === 'in' || operator === 'notin') && values.length === 0)
    errs.push(`values: Invalid value: ${goValues}: for 'in', 'notin' operators, values set can't be empty`);
  if ((operator === 'gt' || operator === 'lt') && values.length === 1 && !/^[+-]?\d+$/.test(values[0] ?? ''))
    errs.push(`values[0]: Invalid value: ${goQuote(values[0] ?? '')}: for 'Gt', 'Lt' operators, the value must be an integer`);
  values.forEach((v, i) => {
    const vErrs = isValidLabelValue(v);
    if (vErrs.length > 0) errs.push(`values[${i}][${key}]: Invalid value: ${goQuote(v)}: ${vErrs.join('; ')}`);
  });
  if (errs.length === 1) throw new Error(errs[0]);
  if (errs.length > 1) throw new Error(`[${errs.join(', ')}]`);
  return { key, operator, values };
}

export function parseLabelSelector(input: string): LabelSelector {
  return { requirements: new Parser(input).parse() };
}

export function matchesLabels(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  return selector.requirements.every((r) => matchRequirement(r, labels));
}

function matchRequirement(r: Requirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = labels[r.key];
  switch (r.operator) {
    case 'in':
    case '=':
    case '==':
      return has && value !== undefined && r.values.includes(value);
    case 'notin':
    case '!=':
      return !has || value === undefined || !r.values.includes(value);
    case 'exists':
      return has;
    case '!':
      return !has;
    case 'gt':
    case 'lt': {
      if (!has || value === undefined || !/^[+-]?\d+$/.test(value)) return false;
      const lhs = BigInt(value);
      const rhs = BigInt(r.values[0] ?? '0');
      return r.operator === 'gt' ? lhs > rhs : lhs < rhs;
    }
  }
}

// ---- field selectors --------------------------------------------------------------------

export interface FieldTerm {
  readonly field: string;
  readonly op: '=' | '!=';
  readonly value: string;
}

function splitTerms(selector: string): string[] {
  if (selector === '') return [];
  const terms: string[] = [];
  let start = 0;
  let inSlash = false;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (inSlash) inSlash = false;
    else if (c === '\\') inSlash = true;
    else if (c === ',') {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

function unescapeValue(s: string): string {
  let out = '';
  let inSlash = false;
  for (const c of s) {
    if (inSlash) {
      if (c === '\\' || c === ',' || c === '=') out += c;
      else throw new SelectorError(`invalid field selector: invalid escape sequence: \\${c}`);
      inSlash = false;
    } else if (c === '\\') inSlash = true;
    else if (c === ',' || c === '=') throw new SelectorError(`invalid field selector: unescaped character in value: ${c}`);
    else out += c;
  }
  if (inSlash) throw new SelectorError('invalid field selector: invalid escape sequence: \\');
  return out;
}

/** fields.ParseSelector followed by the kind's field-label conversion (supported labels only). */
export function parseFieldSelector(selector: string, supported: readonly string[]): FieldTerm[] {
  const terms: FieldTerm[] = [];
  for (const part of splitTerms(selector).sort()) {
    if (part === '') continue;
    let parsed: FieldTerm | undefined;
    for (let i = 0; i < part.length && parsed === undefined; i++) {
      const rest = part.slice(i);
      for (const op of ['!=', '==', '='] as const) {
        if (rest.startsWith(op)) {
          parsed = { field: part.slice(0, i), op: op === '!=' ? '!=' : '=', value: unescapeValue(part.slice(i + op.length)) };
          break;
        }
      }
    }
    if (parsed === undefined) throw new SelectorError(`invalid selector: '${selector}'; can't understand '${part}'`);
    terms.push(parsed);
  }
  for (const t of terms) {
    if (!supported.includes(t.field)) throw new SelectorError(`field label not supported: ${t.field}`);
  }
  return terms;
}

export function matchesFields(terms: readonly FieldTerm[], fields: Readonly<Record<string, string>>): boolean {
  return terms.every((t) => ((fields[t.field] ?? '') === t.value) === (t.op === '='));
}
