import { posix } from 'node:path';
import type { IContainer, IPodSpec } from 'kubernetes-models/v1';
import { type Flags, parseFlags } from '../../csi/flags.js';
import { isObject, type JsonObject } from './load.js';

/** A Deployment's or DaemonSet's pod template, read through the schema it was validated against. */
export interface Workload {
  kind: string;
  name: string;
  namespace: string;
  spec: IPodSpec;
}

export function workloads(docs: readonly JsonObject[]): Workload[] {
  return docs.flatMap((doc) => {
    if (doc.kind !== 'Deployment' && doc.kind !== 'DaemonSet') return [];
    const meta = isObject(doc.metadata) ? doc.metadata : {};
    const template = isObject(doc.spec) && isObject(doc.spec.template) ? doc.spec.template : {};
    // schemaProblems (test/deploy/schema.ts) has checked this shape against the PodSpec schema.
    const spec = (isObject(template.spec) ? template.spec : { containers: [] }) as unknown as IPodSpec;
    return [{ kind: doc.kind, name: String(meta.name), namespace: String(meta.namespace), spec }];
  });
}

/** What Kubernetes puts for a `fieldRef: spec.nodeName` when it expands args: a node's name. */
export const NODE_NAME = 'node-a';

/**
 * `$(VAR)` in a command or an arg, expanded from the container's env as kubelet does: a literal value,
 * or spec.nodeName from the downward API. A reference to no variable stays as written, as in Kubernetes.
 */
export function expand(container: IContainer, text: string): string {
  return text.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => {
    const env = container.env?.find((e) => e.name === name);
    if (env?.value !== undefined) return env.value;
    if (env?.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName') return NODE_NAME;
    return whole;
  });
}

export function expandedArgs(container: IContainer): string[] {
  return (container.args ?? []).map((a) => expand(container, a));
}

/** A flag's value, written `--flag=value` or `--flag value`; undefined when absent. */
export function flagValue(args: readonly string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg.startsWith(`${flag}=`)) return arg.slice(flag.length + 1);
    if (arg === flag) return args[i + 1];
  }
  return undefined;
}

export const hasFlag = (args: readonly string[], flag: string): boolean => args.some((a) => a === flag || a.startsWith(`${flag}=`));

/** The twinvol CSI server's container: it runs twinvol-csi. */
export function isPlugin(container: IContainer): boolean {
  return container.command?.[0] === 'twinvol-csi';
}

/** The plugin's flags, read by the plugin's own parser (csi/flags.ts): an unknown flag throws. */
export function pluginFlags(container: IContainer): Flags {
  return parseFlags(expandedArgs(container), {});
}

/** The name of a sidecar image (registry.k8s.io/sig-storage/<name>:<tag>), or undefined. */
export function imageName(container: IContainer): string | undefined {
  return /\/([^/:]+)(?::[^/]*)?$/.exec(container.image ?? '')?.[1];
}

/**
 * Where a path inside a container really is: `host:<path>` through a hostPath volume (subPath
 * included), `emptyDir:<volume>:<path>` inside the pod, undefined when no volume holds it. Two
 * containers reach the same file exactly when these agree.
 */
export function locate(spec: IPodSpec, container: IContainer, path: string): string | undefined {
  const mounts = (container.volumeMounts ?? []).filter((m) => path === m.mountPath || path.startsWith(`${m.mountPath.replace(/\/$/, '')}/`));
  const mount = mounts.sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  if (!mount) return undefined;
  const volume = spec.volumes?.find((v) => v.name === mount.name);
  const inside = posix.join('/', mount.subPath ?? '', path.slice(mount.mountPath.length));
  if (volume?.hostPath) return `host:${posix.join(volume.hostPath.path, inside).replace(/(.)\/$/, '$1')}`;
  if (volume?.emptyDir) return `emptyDir:${volume.name}:${inside}`;
  return undefined;
}

/** A container's path as the host path it is, or undefined when it is not on the host. */
export function hostPathOf(spec: IPodSpec, container: IContainer, path: string): string | undefined {
  const where = locate(spec, container, path);
  return where?.startsWith('host:') ? where.slice('host:'.length) : undefined;
}
