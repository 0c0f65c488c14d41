import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { type Collected, collect } from '../../helpers/collect.js';
import { type CsiClient, createCsiClient, outcome } from './client.js';
import type { CsiScratch } from './scratch.js';

export const CSI_BIN = resolve(import.meta.dirname, '../../../dist/csi/twinvol-csi');

export interface LaunchOptions {
  nodeId?: string;
  /** Further command-line flags (--max-volumes-per-node 2, --mode node ...). */
  args?: string[];
  /** Variables over the plain environment (a PATH with a stalling tool first, say). */
  env?: NodeJS.ProcessEnv;
  /** The server to run (default: node and the bundle); test/sea runs the single executable. */
  command?: readonly [string, ...string[]];
}

export interface RunningCsi {
  child: ChildProcess;
  client: CsiClient;
  /** Every stderr line so far (JSON log lines). */
  logLines(): string[];
  /**
   * The log once `want` holds of its entries (or after a bounded wait): lines arrive through a pipe,
   * and the reply to a call can reach the test before the line the server wrote before replying.
   */
  logWhen(want: (entries: LogEntry[]) => boolean): Promise<{ text: string; entries: LogEntry[] }>;
  /** SIGTERM, then wait for the exit; returns the exit code. */
  stop(): Promise<number | null>;
}

export type LogEntry = Record<string, unknown>;
const parseLogLine = (line: string) => JSON.parse(line) as LogEntry;

/** The flags that point a server at a scratch world. */
export function scratchArgs(s: CsiScratch, nodeId: string): string[] {
  return ['--endpoint', `unix://${s.socketPath}`, '--node-id', nodeId, '--data-root', s.dataRoot, '--state-dir', s.stateDir, '--kubelet-dir', s.kubeletDir];
}

/** The environment the bundle runs under: a plain PATH, the scratch config, nothing from the machine. */
export function serverEnv(s: CsiScratch): NodeJS.ProcessEnv {
  return { PATH: '/usr/bin:/bin', TWINVOL_CONFIG: s.configPath };
}

/**
 * Runs the bundle with `args` and collects its exit code and output (for flag and start-up checks).
 * `wrapper` runs it under another command (setpriv, to start it without root).
 */
export function runCsiOnce(args: string[], env: NodeJS.ProcessEnv, wrapper: readonly string[] = []): Promise<Collected> {
  requireBundle();
  const [command = process.execPath, ...before] = [...wrapper, process.execPath];
  return collect(command, [...before, CSI_BIN, ...args], { env });
}

function requireBundle(): void {
  if (!existsSync(CSI_BIN)) throw new Error(`${CSI_BIN} is missing: run node scripts/build.mjs first`);
}

/**
 * Starts the real bundled server as a child process on the scratch socket and waits until Probe
 * answers ready. The wait is a readiness poll, not a timing assertion.
 */
export async function launchCsi(s: CsiScratch, options: LaunchOptions = {}): Promise<RunningCsi> {
  requireBundle();
  const nodeId = options.nodeId ?? 'node-a';
  const [command, ...before] = options.command ?? [process.execPath, CSI_BIN];
  const child = spawn(command, [...before, ...scratchArgs(s, nodeId), ...(options.args ?? [])], {
    env: { ...serverEnv(s), ...options.env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const lines: string[] = [];
  let partial = '';
  child.stderr?.on('data', (d: Buffer) => {
    const parts = (partial + d.toString()).split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
  });
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  const client = createCsiClient(s.socketPath);
  const running: RunningCsi = {
    child,
    client,
    logLines: () => [...lines],
    async logWhen(want) {
      // A deadline a loaded machine meets (2 s was not always), left as soon as the lines are there.
      for (const until = Date.now() + 10_000; Date.now() < until && !want(lines.map(parseLogLine)); ) await new Promise((r) => setTimeout(r, 20));
      return { text: lines.join('\n'), entries: lines.map(parseLogLine) };
    },
    async stop() {
      client.close();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
  for (let attempt = 0; attempt < 200; attempt++) {
    if (child.exitCode !== null) throw new Error(`twinvol-csi exited with ${child.exitCode}: ${lines.join('\n')}`);
    if (existsSync(s.socketPath) && (await outcome(client.call('Identity', 'Probe'))).code === 'OK') return running;
    await new Promise((r) => setTimeout(r, 50));
  }
  await running.stop();
  throw new Error(`twinvol-csi did not become ready: ${lines.join('\n')}`);
}
