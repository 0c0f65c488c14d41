import { stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { basename } from 'node:path';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { BACKEND_KINDS, type Core, type SpawnRecord, type SystemCallRecord, type VolumeRecord } from '../shared/index.js';
import type { ListenAddress } from './flags.js';
import type { CallObserver } from './rpc.js';

/** What a volume is doing, cluster-wide, from its catalog record (shared/model.ts Attachment). */
const VOLUME_STATES = ['detached', 'attached', 'staged', 'fenced', 'unreadable'] as const;
type VolumeState = (typeof VOLUME_STATES)[number];

/** From a millisecond (a Probe) to the two-minute deadline of an external tool (config commandTimeoutMs). */
const SECONDS_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Records looked at once when counting volumes: a scrape of a large catalog must not open thousands of files together. */
const READ_CONCURRENCY = 32;

function volumeState(v: VolumeRecord): VolumeState {
  if (!v.attachments.length) return 'detached';
  if (v.attachments.every((a) => a.fenced)) return 'fenced';
  return v.attachments.some((a) => a.inUse && !a.fenced) ? 'staged' : 'attached';
}

/**
 * The CSI server's Prometheus metrics (README "Logs and metrics" lists them). Counters and histograms
 * are fed as calls and commands end (csi/rpc.ts, shared/runner.ts observeSpawns); the volume gauge is
 * computed from the catalog when scraped, so it is never stale and costs nothing between scrapes.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly calls: Counter<'method' | 'code'>;
  private readonly callSeconds: Histogram<'method'>;
  private readonly commands: Counter<'tool'>;
  private readonly commandFailures: Counter<'tool'>;
  private readonly commandSeconds: Histogram<'tool'>;
  private readonly systemCalls: Counter<'call'>;
  private readonly systemCallFailures: Counter<'call'>;
  private volumes: VolumeCounter | undefined;

  constructor() {
    const registers = [this.registry];
    this.calls = new Counter({ name: 'twinvol_csi_calls_total', help: 'CSI calls answered, by method and gRPC status code (OK included)', labelNames: ['method', 'code'], registers });
    this.callSeconds = new Histogram({ name: 'twinvol_csi_call_duration_seconds', help: 'Time to answer a CSI call, by method', labelNames: ['method'], buckets: SECONDS_BUCKETS, registers });
    this.commands = new Counter({ name: 'twinvol_commands_total', help: 'External commands run (mount, losetup, mkfs.ext4, ...) and FlexVolume driver calls, by tool', labelNames: ['tool'], registers });
    this.commandFailures = new Counter({ name: 'twinvol_command_failures_total', help: 'External commands that failed (an exit code not among their answers, a deadline, a start failure), by tool', labelNames: ['tool'], registers });
    this.commandSeconds = new Histogram({ name: 'twinvol_command_duration_seconds', help: 'Time an external command ran, by tool', labelNames: ['tool'], buckets: SECONDS_BUCKETS, registers });
    // Not histograms: a bind or an unmount takes tens of microseconds, below any bucket worth keeping.
    this.systemCalls = new Counter({ name: 'twinvol_system_calls_total', help: 'Mounts made and undone, and loop devices bound and let go, as system calls rather than with mount(8), umount(8) and losetup (the mount addon), by call', labelNames: ['call'], registers });
    this.systemCallFailures = new Counter({ name: 'twinvol_system_call_failures_total', help: 'System calls that failed, each then retried with the tool (counted as a command), by call', labelNames: ['call'], registers });
    const metrics = this;
    new Gauge({
      name: 'twinvol_volumes',
      help: 'Volumes in the catalog, by backend and state (detached, attached, staged on a node, fenced: detached while still staged, unreadable: a record that does not parse)',
      labelNames: ['backend', 'state'],
      registers,
      async collect() {
        const volumes = metrics.volumes;
        if (!volumes) return;
        this.reset();
        let counts: Map<string, number>;
        try {
          counts = await volumes.count();
        } catch {
          // The catalog cannot be listed (data root gone, a network filesystem hung up): no volume
          // series this scrape, rather than a failed scrape that takes the other metrics with it.
          return;
        }
        // Every pair is reported, zeros included: an absent series and a zero look different on a dashboard.
        for (const backend of BACKEND_KINDS) for (const state of VOLUME_STATES) if (state !== 'unreadable') this.set({ backend, state }, 0);
        for (const [key, n] of counts) {
          const [backend = '', state = ''] = key.split('\0');
          this.set({ backend, state }, n);
        }
      },
    });
    collectDefaultMetrics({ register: this.registry });
  }

  /** Calls, by csi/rpc.ts as each ends. */
  readonly observeCall: CallObserver = (method, code, seconds) => {
    this.calls.inc({ method, code });
    this.callSeconds.observe({ method }, seconds);
  };

  /** External commands, by shared/runner.ts as each ends (observeSpawns). */
  readonly observeCommand = (record: SpawnRecord): void => {
    const tool = basename(record.command);
    this.commands.inc({ tool });
    if (record.failed) this.commandFailures.inc({ tool });
    this.commandSeconds.observe({ tool }, record.durationMs / 1000);
  };

  /** Mounts and loop devices made as system calls, by shared/native-mount.ts as each returns (observeSystemCalls). */
  readonly observeSystemCall = (record: SystemCallRecord): void => {
    this.systemCalls.inc({ call: record.call });
    if (record.error !== undefined) this.systemCallFailures.inc({ call: record.call });
  };

  /** The catalog the volume gauge counts, once the server has opened it. */
  countVolumesOf(core: Core): void {
    this.volumes = new VolumeCounter(core);
  }
}

/**
 * Volumes by "backend\0state", for the gauge. The catalog keeps no counts, so every record is looked
 * at; a record is only read again when its file changed since the last scrape (records are replaced by
 * a rename, shared/store/json-record.ts, so a new version is a new inode), which makes a scrape of an
 * unchanged catalog one stat per volume (docs/architecture.md has the figures). A record that cannot be
 * read (corrupt) is counted as unreadable, one removed between the listing and the look not at all;
 * neither fails the scrape.
 */
export class VolumeCounter {
  private readonly known = new Map<string, { version: string; key: string }>();

  constructor(private readonly core: Core) {}

  async count(): Promise<Map<string, number>> {
    const ids = await this.core.catalog.listVolumeIds();
    const listed = new Set(ids);
    for (const id of this.known.keys()) if (!listed.has(id)) this.known.delete(id);
    const counts = new Map<string, number>();
    const add = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);
    let next = 0;
    const worker = async () => {
      while (next < ids.length) {
        const key = await this.keyOf(ids[next++] as string);
        if (key !== undefined) add(key);
      }
    };
    await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, ids.length) }, worker));
    return counts;
  }

  private async keyOf(id: string): Promise<string | undefined> {
    let version: string;
    try {
      // The record's file as shared/store/catalog.ts getVolume reads it.
      const st = await stat(this.core.catalog.volumeRecordPath(id));
      version = `${st.ino}:${st.mtimeMs}:${st.size}`;
    } catch {
      this.known.delete(id);
      return undefined;
    }
    const cached = this.known.get(id);
    if (cached?.version === version) return cached.key;
    let key: string | undefined;
    try {
      const v = await this.core.catalog.getVolume(id);
      key = v && `${v.backend}\0${volumeState(v)}`;
    } catch {
      key = 'unknown\0unreadable';
    }
    if (key === undefined) this.known.delete(id);
    else this.known.set(id, { version, key });
    return key;
  }
}

export interface MetricsEndpoint {
  /** The port bound (the one asked for, or the one the kernel chose for port 0). */
  port: number;
  url: string;
  close(): Promise<void>;
}

/** `host:port`, an IPv6 host in brackets; no host (every interface): `:port`. */
export function addressText(address: ListenAddress): string {
  return `${address.host?.includes(':') ? `[${address.host}]` : (address.host ?? '')}:${address.port}`;
}

/**
 * What the endpoint allows a client. A scrape is one short GET on a connection or two; Node's
 * defaults (a minute for the headers, five for a request, checked every 30 s, no cap on connections)
 * let a client that trickles its headers, or opens thousands of idle connections, hold the
 * process's file descriptors, which the gRPC socket needs too.
 */
export interface EndpointLimits {
  /** Time for a request's headers and for the whole request. */
  requestTimeoutMs: number;
  /** How often connections are checked against that time. */
  checkIntervalMs: number;
  /** Connections open at once; more are closed as they come. */
  maxConnections: number;
}

export const ENDPOINT_LIMITS: EndpointLimits = { requestTimeoutMs: 10_000, checkIntervalMs: 1_000, maxConnections: 32 };

/** Serves GET /metrics on `address` over plain HTTP, as Prometheus scrapes it; anything else is 404. */
export function serveMetrics(metrics: Metrics, address: ListenAddress, limits: EndpointLimits = ENDPOINT_LIMITS): Promise<MetricsEndpoint> {
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are at /metrics\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(req.method === 'HEAD' ? undefined : text),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err instanceof Error ? err.message : String(err)}\n`),
    );
  };
  const server = createServer({ headersTimeout: limits.requestTimeoutMs, requestTimeout: limits.requestTimeoutMs, connectionsCheckingInterval: limits.checkIntervalMs }, handle);
  server.maxConnections = limits.maxConnections;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: address.host, port: address.port }, () => {
      server.off('error', reject);
      const bound = server.address();
      const port = bound && typeof bound === 'object' ? bound.port : address.port;
      resolve({
        port,
        url: `http://${addressText({ host: address.host ?? 'localhost', port })}/metrics`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
