/**
 * `s` as one word for sh and bash, whatever it holds: single-quoted, each ' closed, escaped and
 * reopened. The one quoting of the scripts and shims the admin commands write (flex/migrate/script.ts
 * and emit.ts, flex/compare/tool-count.ts).
 */
export function shQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}
