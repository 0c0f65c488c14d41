/**
 * The current time as an ISO 8601 string in UTC, as Date.prototype.toISOString writes it.
 *
 * Why not toISOString itself: its first call in a process costs about 0.2 ms (V8 sets up its date
 * cache and reads the local time zone, /etc/localtime, which a UTC string never needs), and every
 * FlexVolume call is a new process that stamps a log line and usually a record: 1% of a bare
 * `node -e 0` here, for nothing. The UTC getters cost about 0.02 ms together and read no file.
 * Years outside 0-9999, which toISOString writes with six digits and a sign, go to it.
 */
export function isoNow(ms: number = Date.now()): string {
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  if (!(year >= 0 && year <= 9999)) return d.toISOString();
  return `${pad(year, 4)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)}T${pad(d.getUTCHours(), 2)}:${pad(d.getUTCMinutes(), 2)}:${pad(
    d.getUTCSeconds(),
    2,
  )}.${pad(d.getUTCMilliseconds(), 3)}Z`;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}
