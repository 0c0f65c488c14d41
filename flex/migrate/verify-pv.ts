import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

/**
 * The old FlexVolume PV `twinvol migrate verify --pv FILE` is given: YAML or JSON, one object, a
 * multi-document file or a List, as `kubectl get pv NAME -o yaml` prints it. Only the fields kubelet
 * hands a FlexVolume driver are read; a missing or mistyped one is named in the message.
 */
export interface FlexPv {
  name: string;
  driver: string;
  options: Record<string, string>;
  fsType: string;
  readOnly: boolean;
  /** The PV names a secret: kubelet would add its keys, which verify (talking to no cluster) cannot. */
  secretRef?: string;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The one FlexVolume PV in the file, or the one-line reason there is none. */
export function readFlexPv(file: string, wanted?: string): FlexPv | string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return `--pv ${file} cannot be read`;
  }
  const objects: unknown[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) return `--pv ${file} is not YAML or JSON: ${doc.errors[0]?.message.split('\n')[0] ?? ''}`;
    let value: unknown;
    try {
      // Aliases resolve here, not while parsing: an alias to no anchor, or a billion laughs past
      // maxAliasCount, throws from toJS (as for `migrate plan`, flex/migrate/input.ts).
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (err) {
      return `--pv ${file} is not YAML or JSON: ${(err instanceof Error ? err.message : String(err)).split('\n')[0] ?? ''}`;
    }
    if (isObj(value) && value.kind === 'List' && Array.isArray(value.items)) objects.push(...value.items);
    else if (value !== null && value !== undefined) objects.push(value);
  }
  const pvs = objects.filter((o): o is Obj => isObj(o) && o.kind === 'PersistentVolume');
  const named = (o: Obj) => (isObj(o.metadata) && typeof o.metadata.name === 'string' ? o.metadata.name : '');
  const flex = pvs.filter((o) => isObj(o.spec) && 'flexVolume' in o.spec && (wanted === undefined || named(o) === wanted));
  if (!pvs.length) return `--pv ${file} holds no PersistentVolume`;
  if (!flex.length) return `--pv ${file}: no PersistentVolume${wanted ? ` named ${wanted}` : ''} has spec.flexVolume`;
  if (flex.length > 1) return `--pv ${file} holds ${flex.length} FlexVolume PersistentVolumes (${flex.map(named).join(', ')}): give a file with one`;
  const pv = flex[0] as Obj;
  const name = named(pv);
  const where = `PersistentVolume ${name || '(unnamed)'}`;
  if (!name) return `${where}: metadata.name is missing`;
  const spec = pv.spec as Obj;
  if (spec.volumeMode === 'Block') return `${where}: spec.volumeMode is Block, which FlexVolume never supported (kubelet mounts FlexVolume PVs as filesystems only)`;
  const fv = spec.flexVolume;
  if (!isObj(fv)) return `${where}: spec.flexVolume is not an object`;
  if (typeof fv.driver !== 'string' || !fv.driver) return `${where}: spec.flexVolume.driver is missing`;
  const options: Record<string, string> = {};
  if (fv.options !== undefined) {
    if (!isObj(fv.options)) return `${where}: spec.flexVolume.options is not a map`;
    for (const [k, v] of Object.entries(fv.options)) {
      if (typeof v !== 'string') return `${where}: spec.flexVolume.options.${k} is not a string`;
      options[k] = v;
    }
  }
  if (fv.fsType !== undefined && typeof fv.fsType !== 'string') return `${where}: spec.flexVolume.fsType is not a string`;
  if (fv.readOnly !== undefined && typeof fv.readOnly !== 'boolean') return `${where}: spec.flexVolume.readOnly is not a boolean`;
  const secret = isObj(fv.secretRef) && typeof fv.secretRef.name === 'string' ? fv.secretRef.name : undefined;
  return { name, driver: fv.driver, options, fsType: fv.fsType ?? '', readOnly: fv.readOnly ?? false, ...(secret ? { secretRef: secret } : {}) };
}
