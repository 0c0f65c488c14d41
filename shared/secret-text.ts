/**
 * Cutting known secret values out of text: a FlexVolume driver's output (shared/backends/exec-driver.ts),
 * a failed tool's output that echoes its own command line (shared/runner.ts CommandError, a static
 * volume's `password=`), and each string of a CSI call's log lines (csi/logging.ts). One rule for all
 * three, in the core, which imports nothing, so the runner can use it without reaching into a backend.
 */

const REDACTED = '[redacted]';
/** In place of driver output still holding a short secret; its words are too long to be one (see `scrub`). */
const WITHHELD = '[withheld: holds a short secret]';

interface Cutter {
  /** The forms of three characters or more, longest first (a value holding another is cut whole). */
  long: string[];
  /** The forms of one or two characters, as one pattern that keeps them from cutting into a word. */
  shortPattern: RegExp | undefined;
  short: string[];
  /** The values a URL spells otherwise, each as a pattern (`urlPatternOf`). */
  inUrls: RegExp[];
}

const cutters = new WeakMap<readonly string[], Cutter>();

/**
 * Each secret replaced wherever it appears, in every form it travels in: as given or as a tool prints
 * it (`printedAs`), base64 as the driver receives it (kubernetes.io/secret/<key>), escaped as JSON
 * text quotes it (a driver's reply, written by JavaScript, Python or Go), and percent-encoded as a URL
 * holds it (`urlPatternOf`).
 *
 * A form of one or two characters ("bad PIN 42") is cut only where it stands as a word of its own: no
 * letter or digit against a side of it that is a letter or digit. Cut everywhere, "42" would also go out
 * of every "1425", volume id and path in the call's log lines (which pass through here too), leaving
 * them unreadable; inside a longer word it stays. Text the driver printed, where it may stand anyhow,
 * goes through `shownOutput`, which withholds such text whole.
 */
export function scrub(text: string, secrets: readonly string[]): string {
  if (secrets.length === 0) return text;
  const { long, inUrls, shortPattern } = cutterFor(secrets);
  let out = text;
  for (const form of long) if (out.includes(form)) out = out.split(form).join(REDACTED);
  // Only text that has a percent sign or a plus can hold a value a URL spells otherwise.
  if (/[%+]/.test(out)) for (const pattern of inUrls) out = out.replace(pattern, REDACTED);
  return shortPattern ? out.replace(shortPattern, REDACTED) : out;
}

/**
 * The driver's output (or its status or message) as an error or a log line may show it: scrubbed, and
 * withheld whole while a secret of one or two characters is still in it, inside a longer word where
 * `scrub` left it ("PIN42"). The driver prints what it likes, so no rule for where a value ends can be
 * trusted with its text; a 600-character excerpt that might spell the secret is worth less than the
 * secret. The whole text is checked, not just its excerpt: a cut could leave half a secret at its edge.
 */
export function shownOutput(text: string, secrets: readonly string[]): string {
  if (secrets.length === 0) return text;
  const out = scrub(text, secrets);
  const { short } = cutterFor(secrets);
  if (short.length === 0) return out;
  return out.split(REDACTED).some((piece) => short.some((s) => piece.includes(s))) ? WITHHELD : out;
}

function cutterFor(secrets: readonly string[]): Cutter {
  let cutter = cutters.get(secrets);
  if (!cutter) {
    const forms = [...new Set(secrets.flatMap(formsOf))].sort((a, b) => b.length - a.length);
    const short = forms.filter((f) => f.length < 3);
    // The long ones by split and join, not in one pattern: a secret of 60 KiB made a pattern past
    // V8's limit, and the SyntaxError, its text quoting the pattern, ended the server (test/exec/quirks.test.ts).
    // A URL's user or password is one line: a multi-line secret's lines (a CA bundle's hundreds) get no pattern.
    const inUrls = [...new Set(secrets.flatMap((s) => [s, s.trim()]))].flatMap((value) => urlPatternOf(value) ?? []);
    cutter = { long: forms.filter((f) => f.length >= 3), shortPattern: short.length ? new RegExp(short.map(patternOf).join('|'), 'gu') : undefined, short, inUrls };
    cutters.set(secrets, cutter);
  }
  return cutter;
}

function formsOf(secret: string): string[] {
  return [...new Set(printedAs(secret))].flatMap(encodedAs);
}

/**
 * How a tool may spell a secret's value, before any encoding: as given; trimmed, since a Secret made
 * from a file (kubectl create secret --from-file) ends in the file's newline, which a driver strips
 * before it uses or quotes the value; and each line of a multi-line one, trimmed (a credentials
 * file's `password=...`, a key's), which a tool quotes alone, or rejoined (shared/runner.ts errorDetail
 * trims lines and joins them with "; "). A line of fewer than three characters (a JSON file's brace)
 * is no secret of its own, and cut it would take every brace out of every log line.
 */
function printedAs(secret: string): string[] {
  const trimmed = secret.trim();
  const lines = /[\r\n]/.test(trimmed) ? trimmed.split(/\r?\n|\r/).map((line) => line.trim()).filter((line) => line.length >= 3) : [];
  return [secret, ...(trimmed ? [trimmed] : []), ...lines];
}

/** A value as given, in base64, and escaped as JSON text quotes it. */
function encodedAs(secret: string): string[] {
  if (secret === '') return [];
  const json = JSON.stringify(secret).slice(1, -1);
  const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  // Python's json.dumps escapes every non-ASCII code unit, Go's json.Marshal <, > and & (both in lower case hex).
  return [secret, Buffer.from(secret, 'utf8').toString('base64'), json, json.replace(/[^\x20-\x7e]/g, escape), json.replace(/[<>&\u2028\u2029]/g, escape)];
}

/** Characters no URL encoder escapes (RFC 3986's unreserved): a value of these alone is spelt in a URL as given. */
const UNRESERVED = /[A-Za-z0-9._~-]/;
/** A longer value is no URL's user or password; its pattern would only cost (a pattern is about 20 times its value). */
const URL_VALUE_MOST = 1024;

/**
 * A value as a URL may spell it (a driver's error quoting smb://bob:p%40ss@server, as Go's url.URL
 * prints one): each character outside UNRESERVED as itself or percent-encoded (its UTF-8 bytes, hex in
 * either case), a space also as "+". Every encoder escapes another set (encodeURIComponent leaves
 * !'()*, Go's user info $&+,;=, Python's quote /), so none is assumed. Undefined for a value a URL
 * spells as given, and for one too short for `scrub`'s long forms, too long or of more than one line to be in a URL.
 */
function urlPatternOf(value: string): RegExp | undefined {
  const chars = [...value];
  if (value.length < 3 || value.length > URL_VALUE_MOST || /[\r\n]/.test(value) || chars.every((c) => UNRESERVED.test(c))) return undefined;
  const hexOf = (b: number) => [...b.toString(16).toUpperCase().padStart(2, '0')].map((d) => (/[A-F]/.test(d) ? `[${d}${d.toLowerCase()}]` : d)).join('');
  const spelt = (c: string) => `(?:${literalOf(c)}|${[...Buffer.from(c, 'utf8')].map((b) => `%${hexOf(b)}`).join('')}${c === ' ' ? '|\\+' : ''})`;
  return new RegExp(chars.map((c) => (UNRESERVED.test(c) ? literalOf(c) : spelt(c))).join(''), 'gu');
}

function literalOf(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

const WORD_CHAR = /[\p{L}\p{N}]/u;

/** A short form as a pattern, kept from cutting into a word where it ends in a letter or digit. */
function patternOf(form: string): string {
  const literal = literalOf(form);
  const before = WORD_CHAR.test(form.slice(0, 1)) ? '(?<![\\p{L}\\p{N}])' : '';
  const after = WORD_CHAR.test(form.slice(-1)) ? '(?![\\p{L}\\p{N}])' : '';
  return `${before}${literal}${after}`;
}
