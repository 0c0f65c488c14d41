import { internal } from './errors.js';
import { type Captured, setSpawner, spawnCaptured, type SpawnRequest } from './runner.js';

/**
 * Tools spawned from a thread of their own, for a long-running server. libuv's spawn blocks the
 * calling thread until the child has exec'd: about 2 ms each here, during which the CSI server
 * answered nothing, not even Probe (its p99 while 16 lifecycles ran was 15 ms). On this thread the
 * main one goes on answering. The thread shares the process's file descriptors, so the runner's fd 3
 * (a pinned mount point: shared/pinned-target.ts) means the same file there.
 *
 * The thread runs spawnCaptured's own source text (shared/runner.ts), so there is one way to run a
 * tool, whichever thread runs it; the thread is started on the first spawn, and holds the process
 * open only while a tool runs.
 */
export function spawnOffThread(): void {
  let thread: SpawnThread | undefined;
  setSpawner((request) => {
    if (!thread) {
      // Only this thread's end forgets it: a late 'exit' of a dead one must not drop its successor.
      const started = startThread(() => {
        if (thread === started) thread = undefined;
      });
      thread = started;
    }
    return thread.spawn(request);
  });
}

interface SpawnThread {
  spawn(request: SpawnRequest): Promise<Captured>;
}

/**
 * The thread's heap. It holds a few tools' output at a time, but with V8's defaults its young
 * generation grew for thousands of spawns before collecting: the server's RSS went from 126 to
 * 158 MiB over 2,000 lifecycles, where without the thread it stayed at 117-124. With these it stays
 * within a few MiB (/tmp/prof/mem.mjs: 149, 136, 136 MiB after 500, 2,500 and 5,000). A tool whose
 * output outgrew the old generation would end the thread, fail its call, and the next call starts
 * another; twinvol's tools print a few lines.
 */
const HEAP_LIMITS = { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 48 };

/** The thread's program: the runner's spawnCaptured, and a message in and out per tool. */
const PROGRAM = `
const { spawn } = require('node:child_process');
const { parentPort } = require('node:worker_threads');
const spawnCaptured = ${spawnCaptured.toString()};
parentPort.on('message', ({ id, request }) => {
  spawnCaptured(spawn, request).then((captured) => parentPort.postMessage({ id, captured }));
});
`;

interface Reply {
  id: number;
  captured: Captured;
}

function isReply(value: unknown): value is Reply {
  return typeof value === 'object' && value !== null && 'id' in value && typeof value.id === 'number' && 'captured' in value;
}

/**
 * Starts the thread. Should it die (it should not: spawnCaptured reports every failure as a value),
 * the calls it was running fail with Internal, and the next call starts another (`gone`).
 */
function startThread(gone: () => void): SpawnThread {
  // Not import(): the single executable's main script has no dynamic import (test/sea/executables.test.ts).
  const { Worker } = process.getBuiltinModule('node:worker_threads');
  const worker = new Worker(PROGRAM, { eval: true, stdout: false, stderr: false, resourceLimits: HEAP_LIMITS });
  worker.unref();
  /** The calls running on the thread, by id. */
  const pending = new Map<number, { resolve: (captured: Captured) => void; reject: (err: Error) => void }>();
  let next = 0;
  const failAll = (why: string) => {
    gone();
    for (const call of pending.values()) call.reject(internal(`the spawning thread stopped (${why}); the call can be retried`));
    pending.clear();
  };
  worker.on('message', (message: unknown) => {
    if (!isReply(message)) return;
    pending.get(message.id)?.resolve(message.captured);
    pending.delete(message.id);
    if (!pending.size) worker.unref();
  });
  worker.on('error', (err) => failAll(err.message));
  worker.on('exit', (code) => failAll(`exit code ${code}`));
  return {
    spawn(request) {
      return new Promise((resolve, reject) => {
        const id = next++;
        pending.set(id, { resolve, reject });
        // Held open while a tool runs, as a tool spawned on this thread would hold it.
        worker.ref();
        worker.postMessage({ id, request });
      });
    },
  };
}
