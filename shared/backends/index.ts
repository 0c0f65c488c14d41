import type { BackendKind } from '../model.js';
import type { Backend } from './backend.js';
import { blockBackend } from './block.js';
import { dirBackend } from './dir.js';
import { execBackend } from './exec.js';
import { staticBackend } from './static.js';

const BACKENDS: Record<BackendKind, Backend> = { dir: dirBackend, block: blockBackend, static: staticBackend, exec: execBackend };

export function backendFor(kind: BackendKind): Backend {
  return BACKENDS[kind];
}
