import { type BackendReport, type CompareReport, type ModelStep, workNames } from './report.js';

/**
 * The report as one self-contained HTML page: inline CSS, an inline SVG bar chart per backend (median
 * bar, p95 whisker, one row per model and step), the figures as a table, the differences. No script,
 * no font, no image, nothing fetched.
 */
export function renderHtml(report: CompareReport): string {
  const body = report.backends.map(backendSection).join('\n');
  const method = Object.entries(report.method)
    .map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`)
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>twinvol compare: FlexVolume and CSI</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:72em}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.flex{fill:#d9822b}.csi{fill:#2b6cd9}.k{display:inline-block;width:.8em;height:.8em;margin:0 .3em}
.kf{background:#d9822b}.kc{background:#2b6cd9}.ok{color:#276749}.bad{color:#b91c1c}
dt{font-weight:600}dd{margin:0 0 .4em 1em}
</style></head><body>
<h1>twinvol compare: the same workload through FlexVolume and CSI</h1>
<p>${report.rounds} round${report.rounds === 1 ? '' : 's'} per backend on node ${esc(report.node)}, started ${esc(report.startedAt)}; the private twinvol-csi answered Probe ready in ${report.csiStartMs.toFixed(1)} ms.
<span class="k kf"></span>FlexVolume <span class="k kc"></span>CSI (bar: median, line: p95)</p>
${body}
<h2>How it was measured</h2><dl>${method}</dl>
</body></html>
`;
}

function backendSection(b: BackendReport): string {
  const rows = b.steps.flatMap((s) =>
    (['flex', 'csi'] as const).map(
      (model, i) =>
        `<tr>${i === 0 ? `<td rowspan="2">${esc(s.step)}</td>` : ''}<td>${model}</td>${cells(s[model])}</tr>`,
    ),
  );
  const diffs = b.differences.length
    ? `<p class="bad">Differences in the resulting state:</p><ul>${b.differences.map((d) => `<li>${esc(d.where)} ${esc(d.field)}: FlexVolume <code>${esc(d.flex)}</code>, CSI <code>${esc(d.csi)}</code> (round ${d.round})</li>`).join('')}</ul>`
    : '<p class="ok">No difference in the resulting state (device, filesystem, mount options, ownership, read-only, size).</p>';
  return `<h2>${esc(b.backend)} volume (${esc(b.volume.fsType || 'no fsType')}, ${b.volume.sizeBytes / 2 ** 20} MiB)</h2>
${chart(b)}
<table><tr><th>step</th><th>model</th><th>calls</th><th>median ms</th><th>p95 ms</th><th>processes (median)</th><th>tools run and system calls (all rounds)</th></tr>
${rows.join('\n')}</table>
${diffs}`;
}

function cells(m: ModelStep): string {
  if (!m.supported || !m.latencyMs) return `<td colspan="5">${esc(m.note ?? 'not supported')}</td>`;
  const procs = [...m.processes].sort((a, b) => a - b)[Math.floor(m.processes.length / 2)] ?? 0;
  const tools = workNames(m).map(([t, n]) => `${esc(t)}&times;${n}`).join(' ') || '-';
  const failed = m.failedRounds ? `<br><span class="bad">failed in ${m.failedRounds} rounds: ${esc(m.errors.join(' | '))}</span>` : '';
  return `<td>${esc(m.calls.join(', '))}${failed}</td><td class="n">${m.latencyMs.median.toFixed(1)}</td><td class="n">${m.latencyMs.p95.toFixed(1)}</td><td class="n">${procs}</td><td>${tools}</td>`;
}

/** Horizontal bars on one linear scale per backend: the slowest p95 spans the width. */
function chart(b: BackendReport): string {
  const label = 90;
  const width = 520;
  const row = 14;
  const max = Math.max(1, ...b.steps.flatMap((s) => [s.flex.latencyMs?.p95 ?? 0, s.csi.latencyMs?.p95 ?? 0]));
  const scale = (ms: number) => (ms / max) * width;
  const parts: string[] = [];
  b.steps.forEach((s, i) => {
    const y = i * (2 * row + 8);
    parts.push(`<text x="0" y="${y + row + 4}" font-size="12">${esc(s.step)}</text>`);
    (['flex', 'csi'] as const).forEach((model, j) => {
      const m = s[model].latencyMs;
      const top = y + j * row;
      if (!m) {
        parts.push(`<text x="${label}" y="${top + 11}" font-size="10" fill="#888">${model}: none</text>`);
        return;
      }
      parts.push(`<rect class="${model}" x="${label}" y="${top + 1}" width="${scale(m.median).toFixed(1)}" height="${row - 3}"><title>${model} ${esc(s.step)}: median ${m.median} ms, p95 ${m.p95} ms</title></rect>`);
      parts.push(`<line x1="${(label + scale(m.p95)).toFixed(1)}" x2="${(label + scale(m.p95)).toFixed(1)}" y1="${top}" y2="${top + row - 1}" stroke="#222"/>`);
      parts.push(`<text x="${(label + scale(m.p95) + 4).toFixed(1)}" y="${top + 10}" font-size="10">${m.median.toFixed(1)} ms</text>`);
    });
  });
  const height = b.steps.length * (2 * row + 8);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${label + width + 80}" height="${height}" role="img" aria-label="latency per step, ${esc(b.backend)}">${parts.join('')}</svg>`;
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
