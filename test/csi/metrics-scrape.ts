import type { RunningCsi } from './helpers/server.js';

/** One scrape: every sample by its series, `name{label="value",...}` as Prometheus prints it. */
export type Samples = Map<string, number>;

/** The port the server printed in its "serving metrics" line (it was started on port 0). */
export async function metricsPort(server: RunningCsi): Promise<number> {
  const { entries } = await server.logWhen((es) => es.some((e) => e.msg === 'serving metrics'));
  const line = entries.find((e) => e.msg === 'serving metrics');
  if (typeof line?.port !== 'number') throw new Error(`no "serving metrics" line with a port: ${JSON.stringify(entries)}`);
  return line.port;
}

/** GET /metrics over HTTP, as Prometheus does, parsed (text exposition format: `series value` lines). */
export async function scrape(port: number): Promise<Samples> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
  const samples: Samples = new Map();
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    samples.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return samples;
}

/** A series' name as printed: labels in the order the metric declares them. */
export function series(name: string, labels: Record<string, string> = {}): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return parts.length ? `${name}{${parts.join(',')}}` : name;
}

/** How much each series of `name` grew between two scrapes, keyed by its labels; series that did not move are left out. */
export function growth(before: Samples, after: Samples, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of after) {
    if (key !== name && !key.startsWith(`${name}{`)) continue;
    const delta = value - (before.get(key) ?? 0);
    if (delta !== 0) out[key.slice(name.length)] = delta;
  }
  return out;
}

/** The sum over every series of `name` whose labels include `match`. */
export function total(samples: Samples, name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const [key, value] of samples) {
    if (key !== name && !key.startsWith(`${name}{`)) continue;
    if (Object.entries(match).every(([k, v]) => key.includes(`${k}="${v}"`))) sum += value;
  }
  return sum;
}
