import { type Attachment, formatSize, type Inventory } from '../shared/index.js';

/**
 * `twinvol status`: the core gathers and judges (shared/core/inventory.ts); this only lays it out, as
 * tables with a header each, for a terminal. `--json` prints the inventory itself.
 */
export function statusLines(inv: Inventory): string[] {
  const lines = [`node ${inv.node}: data root ${inv.dataRoot}, state dir ${inv.stateDir}, kubelet dir ${inv.kubeletDir}`, ''];
  lines.push(...table('VOLUMES', ['ID', 'BACKEND', 'SIZE', 'FSTYPE', 'ACCESS', 'ATTACHMENTS'], inv.volumes.map((v) => [v.id, v.backend, v.capacityBytes ? formatSize(v.capacityBytes) : '-', v.fsType || '-', v.access, v.attachments.map(attachment).join(', ') || '-'])));
  lines.push(...table('NODES', ['NODE', 'REGISTERED BY', 'AT'], inv.nodes.map((n) => [n.nodeId, n.registeredBy, n.registeredAt])));
  lines.push(
    ...table(
      'MOUNTS ON THIS NODE',
      ['VOLUME', 'KIND', 'PATH', 'MODE', 'MOUNTED'],
      inv.mounts.map((m) => [m.volumeId, `${m.kind}${m.implicit ? ' (implicit)' : ''}${m.block ? ' (raw block)' : ''}`, m.path, m.readonly ? 'ro' : 'rw', m.mounted ?? (m.bindsFrom ? `(record only; pods bind ${m.bindsFrom})` : m.block && m.kind === 'stage' ? '(device only)' : 'NOTHING')]),
    ),
  );
  lines.push(...table('LOOP DEVICES', ['DEVICE', 'VOLUME', 'BACKING FILE'], inv.loops.map((l) => [l.device, l.volumeId ?? '-', `${l.backingFile}${l.deleted ? ' (deleted)' : ''}${l.readOnly ? ' (read-only)' : ''}`])));
  if (inv.consistent) lines.push('consistent: every record has its mount and every mount, loop device and attachment its record');
  else lines.push(...table('PROBLEMS', ['PROBLEM', 'SUBJECT', 'DETAIL'], inv.problems.map((p) => [p.kind, p.subject, p.detail])));
  return lines;
}

function attachment(a: Attachment): string {
  const marks = [a.readonly ? 'ro' : '', a.inUse ? 'staged' : '', a.fenced ? 'detached, still staged' : '', a.implicit ? 'implicit' : ''].filter(Boolean);
  return marks.length ? `${a.node} (${marks.join(', ')})` : a.node;
}

/** A titled table, columns padded to their widest cell; an empty one says so under its header. */
function table(title: string, header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  // The last column is not padded: no trailing blanks.
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ');
  return [`${title} (${rows.length})`, line(header), ...(rows.length ? rows.map(line) : ['(none)']), ''];
}
