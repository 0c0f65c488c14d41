import { asTwinvolError, blockingFileCalls, type Config, fileSink, invalidArgument, loadConfig, Logger, openCore, scrub, secretsInArgument, spawnBlockingHere, spawnLog, systemCallLog } from '../shared/index.js';
import { failure, type FlexReply } from './reply.js';
import type { FlexVerb } from './verb-names.js';
import { VERBS } from './verbs.js';

/**
 * Runs one FlexVolume call and returns its reply. Never throws: every failure, including bad config
 * or bad argv, becomes a Failure reply whose message is safe to show (no options, no secrets).
 * `loaded` is the config flex/main.ts already read; without it the config is read (and refused) here.
 */
export async function dispatch(verb: FlexVerb, args: readonly string[], loaded?: Config): Promise<FlexReply> {
  const spec = VERBS[verb];
  // A call has nothing else to do while a tool or a file call runs: it waits blocked, which spares
  // it node:child_process (shared/spawn-blocking.ts) and libuv's threads (shared/fs-async.ts).
  spawnBlockingHere();
  blockingFileCalls();
  // Not performance.now(): the global `performance` loads perf_hooks, a millisecond of a call.
  const started = process.hrtime.bigint();
  let logger: Logger | undefined;
  const fields: { volumeId?: string } = {};
  let reply: FlexReply;
  let code: string | undefined;
  try {
    const config = loaded ?? loadConfig();
    logger = new Logger(fileSink(`${config.stateDir}/log/flex.log`), { call: verb });
    if (args.length !== spec.arity)
      throw invalidArgument(`${verb} takes ${spec.arity} argument${spec.arity === 1 ? '' : 's'} (${spec.usage}), got ${args.length}`);
    reply = await spec.handler({ core: openCore(config), args, note: (f) => Object.assign(fields, f) });
  } catch (err) {
    const e = asTwinvolError(err);
    reply = failure(e.message);
    code = e.code;
  }
  // The call's own secrets (its options' kubernetes.io/secret/* and any written inline) are cut from
  // the reply, which kubelet puts in the pod's events, and from the log line, as the CSI server cuts a
  // call's secrets from its status and log (csi/rpc.ts): a refusal quotes what it refused.
  const secrets = args.flatMap(secretsInArgument);
  if (secrets.length && reply.message !== undefined) reply = { ...reply, message: scrub(reply.message, secrets) };
  if (secrets.length && fields.volumeId !== undefined) fields.volumeId = scrub(fields.volumeId, secrets);
  // One line per call, whatever its outcome, with the volume id and what it spawned.
  logger?.log(reply.status === 'Failure' ? 'error' : 'info', 'call', {
    ...fields,
    status: reply.status,
    ...(code ? { code } : {}),
    message: reply.message,
    durationMs: Number((process.hrtime.bigint() - started) / 1_000_000n),
    spawns: spawnLog().map((s) => `${s.command}:${s.exitCode}:${Math.round(s.durationMs)}ms`),
    // Mounts made without a process (shared/native-mount.ts): a failed one names its errno, then the tool's spawn follows.
    systemCalls: systemCallLog().map((c) => `${c.call}:${c.error ?? 0}:${c.durationMs.toFixed(2)}ms`),
  });
  return reply;
}
