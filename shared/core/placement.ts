import { invalidArgument, resourceExhausted } from '../errors.js';
import { nodeSegments, type Segments } from '../topology.js';
import { sameStringMap } from '../string-maps.js';
import { validateStringMap } from '../validate.js';
import type { Core } from './core.js';

/**
 * Where a caller needs a new volume to be reachable from (CSI CreateVolume's
 * accessibility_requirements): some `requisite` topology it must be accessible from, and the
 * `preferred` ones in order of preference.
 */
export interface TopologyRequirement {
  requisite: Segments[];
  preferred: Segments[];
}

/** The requirement as the CSI spec allows it, or InvalidArgument naming the rule it breaks. */
export function validateRequirement(requirement: TopologyRequirement): TopologyRequirement {
  const segments = (list: Segments[], what: string) => list.map((t, i) => validateStringMap(t, `${what}[${i}] segments`, 4096));
  const requisite = segments(requirement.requisite, 'accessibility_requirements.requisite');
  const preferred = segments(requirement.preferred, 'accessibility_requirements.preferred');
  if (!requisite.length && !preferred.length) throw invalidArgument('accessibility_requirements must name requisite or preferred topologies');
  if (requisite.length && !preferred.every((p) => requisite.some((r) => sameStringMap(p, r))))
    throw invalidArgument('accessibility_requirements: every preferred topology must also be requisite');
  return { requisite, preferred };
}

/** A volume held where `held` says is reachable from topology `wanted` when `held` has every segment it names. */
const reachableFrom = (held: Segments, wanted: Segments) => Object.entries(wanted).every(([k, v]) => held[k] === v);

/**
 * Where a new volume lives: nowhere in particular (undefined) when every node sees the data root;
 * with a node-local one, on this node, which must meet the requirement: the preferred topologies
 * first, then the requisite ones. Preferences alone never refuse (the spec lets the plugin choose
 * among all its topologies); requisite topologies this node is in none of are ResourceExhausted.
 */
export function placeVolume(core: Core, requirement: TopologyRequirement | undefined): Segments | undefined {
  if (core.config.dataRootScope === 'shared') return undefined;
  const here = nodeSegments(core.config.nodeName);
  if (!requirement || !requirement.requisite.length) return here;
  if ([...requirement.preferred, ...requirement.requisite].some((t) => reachableFrom(here, t))) return here;
  throw resourceExhausted(`volumes live on the node that holds the data root, node ${core.config.nodeName}, which is in none of the requisite topologies`);
}

/** Whether an existing volume meets a repeated create's requirement: one held nowhere in particular always does. */
export function meetsRequirement(topology: Segments | undefined, requirement: TopologyRequirement | undefined): boolean {
  if (!topology || !requirement || !requirement.requisite.length) return true;
  return requirement.requisite.some((t) => reachableFrom(topology, t));
}

/** Whether a volume made here is reachable from topology `wanted`: always, when every node sees the data root. */
export function reachableHere(core: Core, wanted: Segments | undefined): boolean {
  if (!wanted || core.config.dataRootScope === 'shared') return true;
  return reachableFrom(nodeSegments(core.config.nodeName), wanted);
}
