/**
 * The core's public entry: the one module flex/ and csi/ (and the scripts) import. Everything else
 * under shared/ is the core's own business and may be reorganised without touching a front end; a
 * name a front end needs is exported here on purpose, and a check (test/shared/public-entry.test.ts)
 * refuses any other import path from outside shared/.
 *
 * The package is marked side-effect free (package.json "sideEffects": false), so esbuild keeps only what
 * an entry uses: the FlexVolume start-up path (flex/main.ts) reads the config through this module and
 * still loads nothing else (scripts/build.mjs).
 */

// Configuration, errors, logging.
export { checkConfigFile, checkConfigText, type Config, type ConfigOverrides, DATA_ROOT_SCOPES, type DataRootScope, DEFAULT_CONFIG_PATH, loadConfig } from './config.js';
// Strict valibot objects and one phrase per problem they find, the field named (flex/migrate/mappings.ts reads its mapping files with them).
export { describeIssues, strict as strictSchema } from './store/record-schemas.js';
export {
  aborted,
  alreadyExists,
  asTwinvolError,
  errnoCode,
  type ErrorCode,
  failedPrecondition,
  internal,
  invalidArgument,
  notFound,
  outOfRange,
  resourceExhausted,
  TwinvolError,
  unimplemented,
} from './errors.js';
export { FILE_LOG_MAX_BYTES, fileSink, type Log, type LogFields, Logger, LOG_LEVELS, type LogLevel, type LogSink, redact, redactOptionValues, KUBELET_SECRET_PREFIX, secretsInArgument, secretsInOptions } from './log.js';
export { observeSpawns, run, signalQuietly, type SpawnRecord, spawnLog, toolEnv } from './runner.js';
export { spawnBlockingHere } from './spawn-blocking.js';
export { blockingFileCalls, blockingFileCallsWhile } from './fs-async.js';
export { spawnNatively } from './spawn-native.js';
export { spawnOffThread } from './spawn-thread.js';
export { NATIVE_MOUNT_FILE, nativeMount, nativeMountBeside, observeSystemCalls, type SystemCallRecord, setNativeMountPath, systemCallLog } from './native-mount.js';
export { type MountEntry, mountAt, readMounts } from './mountinfo.js';

// The model, ids and input validation.
export type { AccessRequest, AccessScope, Attachment, BackendKind, ContentSource, GroupSnapshotRecord, NodeRecord, Origin, SnapshotRecord, VolumeRecord } from './model.js';
export { BACKEND_KINDS } from './model.js';
export { groupSnapshotIdForName, idForNameOrUndefined, snapshotIdForName, validateName, volumeIdForName } from './names.js';
export { formatSize, MAX_SIZE_BYTES, MIN_FILESYSTEM_BYTES, parseSize, parseWrittenSize, quantityBytes, requireFilesystemFits, type SizeRange, sizeInRange } from './size.js';
export { sameStringMap } from './string-maps.js';
export { nodeSegments, type Segments, TOPOLOGY_KEY } from './topology.js';
export {
  checkBounds,
  type GroupSnapshotId,
  isValidPvName,
  type NodeId,
  parseBoolean,
  parseGid,
  quoted,
  REQUEST_LIMITS,
  type SnapshotId,
  validateBlockFsType,
  validateGroupSnapshotId,
  validateMountOptions,
  validateNodeName,
  validatePathUnder,
  validatePvName,
  validateSnapshotId,
  validateStringMap,
  validateTimeoutMs,
  validateVolumeId,
  type VolumeId,
} from './validate.js';

// The core and its verbs.
export { type Core, openCore } from './core/core.js';
export { accessMismatch, fsTypeOfUses, scopeOfUses, type VolumeShape } from './core/access.js';
export { type BackendTraits, backendTraits, type VolumeHealth, volumeCondition } from './core/backend-traits.js';
export { availableCapacity, type CapacityQuery } from './core/capacity.js';
export { type AttachOptions, attach, type Attached, attachmentOf, attachWithContext, detach, publishedNodes, releaseAttachment } from './core/attachments.js';
export { type Claims, contradiction, refuseContradiction } from './core/contradiction.js';
export { sweepAbandonedWork, type SweepReport } from './core/housekeeping.js';
export { inventory, type Inventory, type InventoryOptions, type LoopLine, type MountLine, type Problem, PROBLEM_KINDS, type ProblemKind } from './core/inventory.js';
export { thawAbandonedFreezes } from './core/freeze.js';
export { createGroupSnapshot, deleteGroupSnapshot, getGroupSnapshot, type GroupSnapshot, MAX_GROUP_VOLUMES } from './core/group-snapshots.js';
export { checkedPathUnder } from './core/mount-target.js';
export { expandOnNode, type VolumeStats, volumeStats } from './core/node-volume.js';
export { listNodes, registerNode } from './core/nodes.js';
export { attachUnderPvName, rememberPvName } from './core/pv-names.js';
export { type TopologyRequirement } from './core/placement.js';
export { mountsOf, publish, type PublishOptions, unpublish } from './core/publishing.js';
export { requireMountFlagsOptions } from './core/mount-flags.js';
export { endInlineIfUnmounted, INLINE_PARAMETER, livesWithPod, publishingInline } from './core/inline-volumes.js';
export { createSnapshot, deleteSnapshot, getSnapshot, listSnapshots, type SnapshotFilter } from './core/snapshots.js';
export { nodeAttach, stage, type StageOptions, unstage } from './core/staging.js';
export { checkVolumeSpec, createVolume, type CreateVolumeSpec, deleteVolume, describeVolume, expandVolume, listVolumes, validateBackend, type VolumeListing } from './core/volumes.js';

// The exec backend: third-party FlexVolume drivers behind the CSI server. exec-volumes.ts runs them
// through execa; only the CSI server imports it, so the FlexVolume executable's bundle never holds it.
export {
  asksForExec,
  DEVICE_KEY,
  type DriverName,
  EXEC_BACKEND,
  EXEC_KEYS,
  execRecordParameters,
  type ExecVolume,
  execVolumeContext,
  execVolumeOf,
  execVolumeOfRecord,
  flexDeviceMountPath,
  type FlexPort,
  isExecVolume,
  parseDriverName,
} from './backends/exec.js';
export { type DriverRun, runDriver } from './backends/exec-run.js';
export { DEFAULT_PLUGIN_DIR, type FlexLog, type FlexSettings } from './backends/exec-driver.js';
export { scrub, shownOutput } from './secret-text.js';
export { type DriverCapabilities, type OutputMode, type ReplyOutcome, readReply } from './backends/exec-reply.js';
export { type ExecPublish, ExecVolumes, flexArgv, type PodInfo } from './backends/exec-volumes.js';
export { csiGlobalMountPath, csiPodMountPath, DEFAULT_CSI_DRIVER_NAME, type FlexDriverName, flexGlobalMountPath, flexPodVolumePath, validateCsiDriverName } from './kubelet-paths.js';
export { type LoopDevice, loopDevices } from './loop-devices.js';
