// The metrics endpoint's limits (csi/metrics.ts ENDPOINT_LIMITS), with small ones so the test waits
// little: a client that never finishes its headers is cut off, and connections past the cap are
// closed as they come. Waits are deadlines for what the server does, not timings asserted.
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Metrics, type MetricsEndpoint, serveMetrics } from '../../csi/metrics.js';

let endpoint: MetricsEndpoint | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await endpoint?.close();
  endpoint = undefined;
});

async function serve(limits: { requestTimeoutMs: number; checkIntervalMs: number; maxConnections: number }): Promise<number> {
  endpoint = await serveMetrics(new Metrics(), { host: '127.0.0.1', port: 0 }, limits);
  return endpoint.port;
}

/** A connection that has sent `text`, and a promise of when the server closed it (its reply, if any). */
async function open(port: number, text: string): Promise<{ closed: Promise<string> }> {
  const socket = connect({ host: '127.0.0.1', port });
  sockets.push(socket);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let reply = '';
  socket.on('data', (d: Buffer) => (reply += d.toString()));
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(reply)));
  socket.on('error', () => undefined);
  socket.write(text);
  return { closed };
}

const within = <T>(p: Promise<T>, ms: number) => Promise.race([p, new Promise<'still open'>((r) => setTimeout(() => r('still open'), ms))]);

describe('the metrics endpoint against clients that are not scrapers', () => {
  it('cuts off a request whose headers never end', async () => {
    const port = await serve({ requestTimeoutMs: 300, checkIntervalMs: 100, maxConnections: 8 });
    const slow = await open(port, 'GET /metrics HTTP/1.1\r\nHost: x\r\n');
    // With Node's defaults this stays open for a minute.
    expect(await within(slow.closed, 5_000)).toMatch(/^(HTTP\/1\.1 408|$)/);
  });

  it('closes connections past the cap as they come, and still answers a scrape once they go', async () => {
    const port = await serve({ requestTimeoutMs: 10_000, checkIntervalMs: 1_000, maxConnections: 2 });
    const idle = [await open(port, ''), await open(port, '')];
    const third = await open(port, 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await within(third.closed, 5_000)).toBe('');
    for (const s of sockets.splice(0)) s.destroy();
    await Promise.all(idle.map((c) => c.closed));
    const scrape = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(scrape.status).toBe(200);
    expect(await scrape.text()).toMatch(/^# HELP /m);
  });
});
