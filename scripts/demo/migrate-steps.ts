import { spawn } from 'node:child_process';
import { parseAllDocuments } from 'yaml';
import type { ScratchWorld as Scratch } from '../../flex/scratch-world.js';
import { printStep } from './report.js';

/** One run of the twinvol executable's administrator commands, as an operator types them. */
export interface Run {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * One run of `twinvol ARGS` in the scratch world. Its temporary files (compare's own scratch world)
 * go below the demo's, so nothing of it can outlive the demo's clean-up. It runs in a process group of
 * its own, out of reach of the terminal's Ctrl-C: on `signal` the demo sends it SIGTERM once (its own
 * handler then takes down what it made) and waits for it to exit before the demo's clean-up begins.
 */
export function twinvol(bin: string, scratch: Scratch, args: readonly string[], signal?: AbortSignal): Promise<Run> {
  const started = performance.now();
  return new Promise((done, fail) => {
    if (signal?.aborted) return fail(signal.reason);
    const env = { PATH: '/usr/bin:/bin', ...scratch.env, TMPDIR: scratch.root };
    const child = spawn(bin, [...args], { stdio: ['ignore', 'pipe', 'pipe'], env, detached: true });
    const stop = () => child.kill('SIGTERM');
    signal?.addEventListener('abort', stop, { once: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', (err) => {
      signal?.removeEventListener('abort', stop);
      fail(err);
    });
    child.on('close', (code) => {
      signal?.removeEventListener('abort', stop);
      if (signal?.aborted) fail(signal.reason);
      else done({ code: code ?? -1, stdout, stderr, ms: performance.now() - started });
    });
  });
}

/**
 * What the cluster holds before the move, as `kubectl get pv,pvc,deploy -o yaml` would print it: each
 * volume's FlexVolume PV bound to its claim, and the Deployment that mounts both claims.
 */
export function clusterObjects(volumes: readonly { id: string; fsType: string; size: string }[]): string {
  const items: object[] = [];
  for (const v of volumes) {
    items.push({
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: `pv-${v.id}` },
      spec: {
        capacity: { storage: v.size },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Delete',
        claimRef: { namespace: 'default', name: `data-${v.id}` },
        flexVolume: { driver: 'twinvol/twinvol', ...(v.fsType ? { fsType: v.fsType } : {}), options: { volumeId: v.id } },
      },
    });
    items.push({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: `data-${v.id}`, namespace: 'default' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: v.size } }, storageClassName: '', volumeName: `pv-${v.id}` },
    });
  }
  items.push({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'app', namespace: 'default' },
    spec: {
      selector: { matchLabels: { app: 'demo' } },
      template: {
        metadata: { labels: { app: 'demo' } },
        spec: {
          containers: [{ name: 'app', image: 'busybox', volumeMounts: volumes.map((v) => ({ name: v.id, mountPath: `/data/${v.id}` })) }],
          volumes: volumes.map((v) => ({ name: v.id, persistentVolumeClaim: { claimName: `data-${v.id}` } })),
        },
      },
    },
  });
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items }, null, 2);
}

/** The new CSI PVs in `twinvol migrate plan`'s YAML: PV name -> volumeHandle. */
export function plannedHandles(yamlText: string): Map<string, { handle: string; driver: string }> {
  const out = new Map<string, { handle: string; driver: string }>();
  for (const doc of parseAllDocuments(yamlText)) {
    const o = doc.toJS() as { kind?: string; metadata?: { name?: string }; spec?: { csi?: { driver?: string; volumeHandle?: string } } } | null;
    if (o?.kind === 'PersistentVolume' && o.spec?.csi?.volumeHandle) out.set(o.metadata?.name ?? '', { handle: o.spec.csi.volumeHandle, driver: o.spec.csi.driver ?? '' });
  }
  return out;
}

/** Prints a command's output indented, every line or those from the first matching `from` on. */
export function show(text: string, from?: RegExp): void {
  const lines = text.replace(/\n$/, '').split('\n');
  const start = from ? Math.max(0, lines.findIndex((l) => from.test(l))) : 0;
  for (const line of lines.slice(start)) process.stdout.write(`    ${line}\n`);
}

/** `twinvol migrate verify VOLUME`: its step count and its checksums and verdict, which is what the demo is about. */
export async function verifyStep(bin: string, scratch: Scratch, volumeId: string, signal?: AbortSignal): Promise<void> {
  const r = await twinvol(bin, scratch, ['migrate', 'verify', volumeId], signal);
  const calls = r.stdout.split('\n').filter((l) => /^ {2}\[(flex|csi )\]/.test(l));
  const flex = calls.filter((l) => l.startsWith('  [flex]')).length;
  printStep({ model: 'host', call: `twinvol migrate verify ${volumeId}`, outcome: r.code === 0 ? 'exit 0' : `exit ${r.code}`, ms: r.ms, detail: `${flex} FlexVolume calls, ${calls.length - flex} CSI calls` });
  show(r.stdout, /^checksums$/);
  if (r.code !== 0) throw new Error(`migrate verify ${volumeId} failed: ${r.stderr.trim() || 'see its report above'}`);
}
