import * as v from 'valibot';
import { describeIssues, strictSchema, validateCsiDriverName } from '../../shared/index.js';
import { InputError, type Source } from './input.js';
import type { Json } from './objects.js';
import { parseAllDocuments } from 'yaml';

/**
 * How a FlexVolume driver's PV becomes a PV of its vendor's CSI driver (`--prefer vendor`, or any
 * driver a `--mapping` file names). Declarative, so a mapping file says everything a built-in says.
 */
export interface Mapping {
  /** flexVolume.driver, e.g. "k8s/nfs". */
  match: string;
  /** The CSI driver's name, e.g. "nfs.csi.k8s.io". */
  driver: string;
  /** flexVolume.options key -> volumeAttributes key (`prefix`: prepended when the value lacks it). */
  options: Record<string, { to: string; prefix?: string }>;
  /** flexVolume.options keys that must be present and non-empty. */
  required: string[];
  /** flexVolume.options keys whose value is a list of mount options, split at the separator given. */
  mountOptions: Record<string, string>;
  /** flexVolume.options key -> a mount option prefix: the value becomes one mount option (`--tmp-path=` + value). */
  flags: Record<string, string>;
  /** flexVolume.options key -> value (lower case) -> mount options that value stood for. */
  switches: Record<string, Record<string, string[]>>;
  /** flexVolume.options keys the FlexVolume driver never acted on -> why; dropped with a note. */
  ignore: Record<string, string>;
  /** Mount options the FlexVolume driver always used, which the CSI driver does not add itself. */
  addMountOptions: string[];
  /** Fixed volumeAttributes. */
  attributes: Record<string, string>;
  secret: {
    /** Where flexVolume.secretRef goes on the CSI PV. */
    placement: 'nodeStage' | 'nodePublish';
    /** The CSI driver cannot mount without it. */
    required: boolean;
    /** Secret key renames: a new Secret with the CSI driver's keys is emitted beside the PV. */
    keys: Record<string, string>;
    /** volumeAttributes read from the secret's data: attribute -> secret key (before renames). */
    attributes: Record<string, string>;
  };
  /** What becomes of flexVolume.fsType: kept as csi.fsType, or dropped (the driver's type is fixed). */
  fsType: 'keep' | 'drop';
  /** The CSI volumeHandle: `{attribute}` is a volumeAttributes value, `{pv}` the PV's name. */
  volumeHandle: string;
  /** Where the facts came from (a built-in's citation; a mapping file's path). */
  source: string;
}

/**
 * The built-in mappings. Each FlexVolume side is what the driver's own script reads from the options
 * kubelet hands it (kubelet: pkg/volume/flexvolume/util.go addSecretsToOptions puts each secret key in
 * as kubernetes.io/secret/<key>, base64, from a Secret whose type must equal the driver name,
 * pkg/volume/util/util.go GetSecretForPV); each CSI side is the driver's documented static-PV fields.
 */
export const BUILT_IN: readonly Mapping[] = [
  {
    // kubernetes/examples staging/volumes/flexvolume/nfs: mounts `${server}:/${share}` with
    // "-o tcp,_netdev,soft,timeo=10,intr" plus noatime. Its protocol, atime and readonly options are
    // read with `jq -r`, which prints "null" for a missing key, and tested with `-n`, so every value
    // was replaced by its default: tcp, noatime, never ro. Read-only came only from kubelet's bind.
    // csi-driver-nfs docs/driver-parameters.md (PV usage): volumeAttributes server and share are
    // mandatory; volumeHandle "{nfs-server-address}#{share-name}#{sub-dir-name}", unique per share.
    match: 'k8s/nfs',
    driver: 'nfs.csi.k8s.io',
    options: { server: { to: 'server' }, share: { to: 'share', prefix: '/' } },
    required: ['server', 'share'],
    mountOptions: {},
    flags: {},
    switches: {},
    ignore: {
      protocol: 'the k8s/nfs script always mounted with tcp, whatever this option said',
      atime: 'the k8s/nfs script always mounted with noatime, whatever this option said',
      readonly: 'the k8s/nfs script never mounted read-only for this option (read-only comes from the PV)',
    },
    // _netdev only means something in fstab and intr is ignored by Linux since 2.6.25: both dropped.
    addMountOptions: ['proto=tcp', 'soft', 'timeo=10', 'noatime'],
    attributes: {},
    secret: { placement: 'nodePublish', required: false, keys: {}, attributes: {} },
    fsType: 'drop',
    volumeHandle: '{server}#{share}#',
    source: 'kubernetes/examples staging/volumes/flexvolume/nfs; csi-driver-nfs docs/driver-parameters.md',
  },
  {
    // fstab/cifs (github.com/fstab/cifs, the `cifs` script): `mount -t cifs $networkPath -o
    // username=<secret username>,$mountOptions[,context=system_u:object_r:container_file_t:s0 when
    // selinuxEnabled is "true"]`, the password from the secret through PASSWD. csi-driver-smb
    // docs/driver-parameters.md (PV usage): volumeAttributes.source "//server/share" mandatory;
    // nodeStageSecretRef (username, password, optional domain) mandatory.
    match: 'fstab/cifs',
    driver: 'smb.csi.k8s.io',
    options: { networkPath: { to: 'source' } },
    required: ['networkPath'],
    mountOptions: { mountOptions: ',' },
    flags: {},
    switches: { selinuxEnabled: { true: ['context=system_u:object_r:container_file_t:s0'] } },
    ignore: {},
    addMountOptions: [],
    attributes: {},
    secret: { placement: 'nodeStage', required: true, keys: {}, attributes: {} },
    fsType: 'drop',
    volumeHandle: '{source}##',
    source: 'github.com/fstab/cifs cifs; csi-driver-smb docs/driver-parameters.md',
  },
  {
    // Azure/kubernetes-volume-drivers flexvolume/smb (the `smb` script): mount.cifs $source with
    // username, password and domain from the secret, kubelet's ro/rw, and `.mountoptions`. jq is
    // case-sensitive: the README's own example PV spells it mountOptions, which the script never
    // read, so that key is dropped rather than applied for the first time.
    match: 'microsoft.com/smb',
    driver: 'smb.csi.k8s.io',
    options: { source: { to: 'source' } },
    required: ['source'],
    mountOptions: { mountoptions: ',' },
    flags: {},
    switches: {},
    ignore: { mountOptions: 'the microsoft.com/smb script reads only "mountoptions" (lower case); these options were never applied' },
    addMountOptions: [],
    attributes: {},
    secret: { placement: 'nodeStage', required: true, keys: {}, attributes: {} },
    fsType: 'drop',
    volumeHandle: '{source}##',
    source: 'Azure/kubernetes-volume-drivers flexvolume/smb/deployment/smb-flexvol-installer/smb; csi-driver-smb docs/driver-parameters.md',
  },
  {
    // Azure/kubernetes-volume-drivers flexvolume/blobfuse (the `blobfuse` script): `blobfuse <dir>
    // --container-name=$container --tmp-path=$tmppath -o allow_other $mountoptions`, the account name
    // and key from the secret's accountname and accountkey. blob-csi-driver docs/driver-parameters.md
    // (static provisioning): volumeAttributes storageAccount and containerName mandatory, protocol
    // "fuse" (blobfuse v1, the default); nodeStageSecretRef keys azurestorageaccountname and
    // azurestorageaccountkey; volumeHandle "{account-name}_{container-name}" (no "#", no "/"); the
    // cache directory is the --tmp-path mount option.
    match: 'azure/blobfuse',
    driver: 'blob.csi.azure.com',
    options: { container: { to: 'containerName' } },
    required: ['container'],
    mountOptions: { mountoptions: ' ' },
    flags: { tmppath: '--tmp-path=' },
    switches: {},
    ignore: {},
    addMountOptions: [],
    attributes: { protocol: 'fuse' },
    secret: {
      placement: 'nodeStage',
      required: true,
      keys: { accountname: 'azurestorageaccountname', accountkey: 'azurestorageaccountkey' },
      attributes: { storageAccount: 'accountname' },
    },
    fsType: 'drop',
    volumeHandle: '{storageAccount}_{containerName}',
    source: 'Azure/kubernetes-volume-drivers flexvolume/blobfuse/deployment/blobfuse-flexvol-installer/blobfuse; blob-csi-driver docs/driver-parameters.md',
  },
];

const text = v.pipe(v.string(), v.minLength(1, 'empty'));
const stringMap = v.record(v.string(), v.string());
const mappingFileEntry = strictSchema({
  match: text,
  driver: text,
  options: v.optional(v.record(v.string(), v.union([text, strictSchema({ to: text, prefix: v.optional(text) })]))),
  required: v.optional(v.array(text)),
  mountOptions: v.optional(stringMap),
  flags: v.optional(stringMap),
  switches: v.optional(v.record(v.string(), v.record(v.string(), v.array(text)))),
  ignore: v.optional(v.union([v.array(text), stringMap])),
  addMountOptions: v.optional(v.array(text)),
  attributes: v.optional(stringMap),
  secret: v.optional(
    strictSchema({
      placement: v.optional(v.picklist(['nodeStage', 'nodePublish'])),
      required: v.optional(v.boolean()),
      keys: v.optional(stringMap),
      attributes: v.optional(stringMap),
    }),
  ),
  fsType: v.optional(v.picklist(['keep', 'drop'])),
  volumeHandle: v.optional(text),
});
const mappingFile = strictSchema({ mappings: v.array(mappingFileEntry) });

/**
 * A `--mapping` file: `mappings:` a list of entries with the fields of Mapping (every one but match
 * and driver optional: options renamed as given, nothing required, the secret as the node publish
 * secret, fsType kept, volumeHandle the PV name). Checked whole before anything is planned.
 */
export function parseMappingFile(source: Source): Mapping[] {
  const docs = parseAllDocuments(source.text);
  const doc = docs[0];
  if (docs.length !== 1 || !doc) throw new InputError(`${source.name}: a mapping file is one YAML document`);
  const problem = doc.errors[0];
  if (problem) throw new InputError(`${source.name}: not YAML: ${(problem.message.split('\n')[0] ?? '').replace(/:$/, '')}`);
  let value: Json;
  try {
    value = doc.toJS({ maxAliasCount: 100 }) as Json;
  } catch (err) {
    throw new InputError(`${source.name}: not YAML: ${err instanceof Error ? err.message : String(err)}`);
  }
  const parsed = v.safeParse(mappingFile, value);
  if (!parsed.success) throw new InputError(`${source.name}: ${describeIssues(parsed.issues)}`);
  return parsed.output.mappings.map((m, i) => {
    const where = `${source.name}: mappings.${i}`;
    const options = Object.fromEntries(Object.entries(m.options ?? {}).map(([k, v]) => [k, typeof v === 'string' ? { to: v } : v]));
    const ignore = Array.isArray(m.ignore) ? Object.fromEntries(m.ignore.map((k) => [k, `the mapping file says to ignore it`])) : (m.ignore ?? {});
    for (const sep of Object.values(m.mountOptions ?? {})) if (sep === '') throw new InputError(`${where}.mountOptions: a separator must not be empty`);
    // The API server refuses a PV whose spec.csi.driver is not such a name: the whole plan would fail at apply.
    try {
      validateCsiDriverName(m.driver, `${where}.driver ${JSON.stringify(m.driver.slice(0, 80))}`);
    } catch (err) {
      throw new InputError(err instanceof Error ? err.message : String(err));
    }
    return {
      match: m.match,
      driver: m.driver,
      options,
      required: m.required ?? [],
      mountOptions: m.mountOptions ?? {},
      flags: m.flags ?? {},
      switches: Object.fromEntries(Object.entries(m.switches ?? {}).map(([k, v]) => [k, Object.fromEntries(Object.entries(v).map(([value, opts]) => [value.toLowerCase(), opts]))])),
      ignore,
      addMountOptions: m.addMountOptions ?? [],
      attributes: m.attributes ?? {},
      secret: { placement: m.secret?.placement ?? 'nodePublish', required: m.secret?.required ?? false, keys: m.secret?.keys ?? {}, attributes: m.secret?.attributes ?? {} },
      fsType: m.fsType ?? 'keep',
      volumeHandle: m.volumeHandle ?? '{pv}',
      source: source.name,
    };
  });
}

/** The mapping for a driver: a mapping file's first, then (with --prefer vendor) a built-in. */
export function mappingFor(driver: string, fromFile: readonly Mapping[], preferVendor: boolean): Mapping | undefined {
  return fromFile.find((m) => m.match === driver) ?? (preferVendor ? BUILT_IN.find((m) => m.match === driver) : undefined);
}
