import { chmod, rm } from 'node:fs/promises';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { Log } from '../shared/index.js';
import { CSI_SERVICES, csiServiceDefinitions } from './definition.js';
import { prepareSocket } from './endpoint.js';
import protoText from './proto/csi.proto';
import type { ServiceTable } from './services.js';
import type { Settings } from './context.js';

export interface ServerOptions {
  socketPath: string;
  settings: Settings;
  log: Log;
  /**
   * What answers each service's calls (a service absent here is UNIMPLEMENTED: grpc-js answers so),
   * once known: csi.proto is parsed meanwhile.
   */
  services: Promise<ServiceTable>;
}

export interface RunningServer {
  /** Stops taking calls, lets those in flight finish (up to `graceMs`), removes the socket. */
  stop(graceMs?: number): Promise<void>;
}

/** Serves `services` over gRPC on the unix socket at `socketPath`, born 0600. */
export async function serveSocket({ socketPath, settings, log, services }: ServerOptions): Promise<RunningServer> {
  const definitions = csiServiceDefinitions(protoText);
  // Well above any request within REQUEST_LIMITS (shared/validate.ts), well below grpc-js's 4 MiB default.
  const server = new Server({ 'grpc.max_receive_message_length': 1024 * 1024 });
  const table = await services;
  for (const name of CSI_SERVICES) {
    const handlers = table[name];
    if (handlers) server.addService(definitions[name], handlers);
  }

  await prepareSocket(socketPath);
  // The socket is born 0600 (no moment where others could connect), and chmod makes sure of it.
  const umask = process.umask(0o177);
  try {
    await new Promise<number>((resolve, reject) =>
      server.bindAsync(`unix:${socketPath}`, ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
  } finally {
    process.umask(umask);
  }
  await chmod(socketPath, 0o600);
  log.info('serving', { endpoint: `unix://${socketPath}`, mode: settings.mode, nodeId: settings.nodeId, driver: settings.driverName, version: settings.vendorVersion });

  return {
    async stop(graceMs = 10_000) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      await rm(socketPath, { force: true });
    },
  };
}
