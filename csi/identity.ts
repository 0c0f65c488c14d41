import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import { failedPrecondition } from '../shared/index.js';
import { type ServiceContext, servesController } from './context.js';
import type { Empty, GetPluginCapabilitiesResponse, GetPluginInfoResponse, PluginCapability, ProbeResponse } from './csi-types.js';

export function identityService({ core, rpc, settings, tools }: ServiceContext): UntypedServiceImplementation {
  const capabilities: PluginCapability[] = [
    ...(servesController(settings.mode) ? [{ service: { type: 'CONTROLLER_SERVICE' as const } }, { service: { type: 'GROUP_CONTROLLER_SERVICE' as const } }] : []),
    // Volumes are held on one node only when the data root is node-local (shared/core/placement.ts).
    ...(core.config.dataRootScope === 'node' ? [{ service: { type: 'VOLUME_ACCESSIBILITY_CONSTRAINTS' as const } }] : []),
    { volume_expansion: { type: 'ONLINE' } },
  ];
  return {
    GetPluginInfo: rpc.unary<Empty, GetPluginInfoResponse>('GetPluginInfo', async () => ({
      name: settings.driverName,
      vendor_version: settings.vendorVersion,
      manifest: {},
    })),

    GetPluginCapabilities: rpc.unary<Empty, GetPluginCapabilitiesResponse>('GetPluginCapabilities', async () => ({ capabilities })),

    // The tools were looked up once at start: Probe is called every few seconds and must stay cheap.
    Probe: rpc.unary<Empty, ProbeResponse>('Probe', async () => {
      if (tools.missing.length) throw failedPrecondition(`required tools are missing: ${tools.missing.join(', ')}`);
      return { ready: { value: true } };
    }),
  };
}
