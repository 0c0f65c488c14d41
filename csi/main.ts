// The CSI server: one long-running process serving Identity plus Controller and/or Node over a unix
// socket, its core on a thread of its own (csi/service-thread.ts). This entry loads nothing else
// before that thread is on its way, so that each thread loads its code while the other does (the
// main thread grpc-js and csi.proto, the service thread the core): one after the other, they made
// the cold start to the first Probe 1.9x as long (scripts/bench/csi.mjs measures it: csi.cold-start).
import { ServiceThread } from './service-thread.js';

const thread = ServiceThread.spawn();
void import('./server-main.js').then((m) => m.main(thread));
