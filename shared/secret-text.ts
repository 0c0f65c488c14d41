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
}

const cutters = new WeakMap<readonly string[], Cutter>();

/**
 * Each secret replaced wherever it appears, in every form it travels in: as given or as a tool prints
 * it (`printedAs`), base64 as the driver receives it (kubernetes.io/secret/<key>), and escaped as JSON
 * text quotes it (a driver's reply, written by JavaScript, Python or Go).
 *
 * A form of one or two characters ("bad PIN 42") is cut only where it stands as a word of its own: no
 * letter or digit against a side of it that is a letter or digit. Cut everywhere, "42" would also go out
 * of every "1425", volume id and path in the call's log lines (which pass through here too), leaving
 * them unreadable; inside a longer word it stays. Text the driver printed, where it may stand anyhow,
 * goes through `shownOutput`, which withholds such text whole.
 */
export function scrub(text: string, secrets: readonly string[]): string {
  if (secrets.length === 0) return text;
  const { long, shortPattern } = cutterFor(secrets);
  let out = text;
  for (const form of long) if (out.includes(form)) out = out.split(form).join(REDACTED);
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
    cutter = { long: forms.filter((f) => f.length >= 3), shortPattern: short.length ? new RegExp(short.map(patternOf).join('|'), 'gu') : undefined, short };
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

const WORD_CHAR = /[\p{L}\p{N}]/u;

/** A short form as a pattern, kept from cutting into a word where it ends in a letter or digit. */
function patternOf(form: string): string {
  const literal = form.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
  const before = WORD_CHAR.test(form.slice(0, 1)) ? '(?<![\\p{L}\\p{N}])' : '';
  const after = WORD_CHAR.test(form.slice(-1)) ? '(?![\\p{L}\\p{N}])' : '';
  return `${before}${literal}${after}`;
}
