import { failedPrecondition } from '../shared/index.js';
import { type IdentityContext, servesController } from './context.js';
import type {
  GetPluginCapabilitiesRequest,
  GetPluginCapabilitiesResponse,
  GetPluginInfoRequest,
  GetPluginInfoResponse,
  IdentityHandlers,
  PluginCapability,
  ProbeRequest,
  ProbeResponse,
} from './csi-types.js';

export function identityService({ config, rpc, settings, tools, stalled }: IdentityContext): IdentityHandlers {
  const capabilities: PluginCapability[] = [
    ...(servesController(settings.mode) ? [{ service: { type: 'CONTROLLER_SERVICE' as const } }, { service: { type: 'GROUP_CONTROLLER_SERVICE' as const } }] : []),
    // Volumes are held on one node only when the data root is node-local (shared/core/placement.ts).
    ...(config.dataRootScope === 'node' ? [{ service: { type: 'VOLUME_ACCESSIBILITY_CONSTRAINTS' as const } }] : []),
    { volume_expansion: { type: 'ONLINE' } },
  ];
  return {
    GetPluginInfo: rpc.unary<GetPluginInfoRequest, GetPluginInfoResponse>('GetPluginInfo', async () => ({
      name: settings.driverName,
      vendor_version: settings.vendorVersion,
      manifest: {},
    })),

    GetPluginCapabilities: rpc.unary<GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse>('GetPluginCapabilities', async () => ({ capabilities })),

    // The tools were looked up once at start: Probe is called every few seconds and must stay cheap.
    Probe: rpc.unary<ProbeRequest, ProbeResponse>('Probe', async () => {
      if (tools.missing.length) throw failedPrecondition(`required tools are missing: ${tools.missing.join(', ')}`);
      const stuck = stalled?.();
      if (stuck) throw failedPrecondition(stuck);
      return { ready: { value: true } };
    }),
  };
}
