// A horizontal bar chart in SVG, drawn with DOM APIs: one bar per row, values from -1 to 1.

import { svg } from './dom.js';

/** A chart of `rows` ([{name, value, note}]); null values are drawn as "n/a". */
export function barChart(rows, { title = 'Chart', width = 720 } = {}) {
  const rowHeight = 22;
  const left = 260;
  const plot = width - left - 60;
  const height = rows.length * rowHeight + 30;
  const x = (v) => left + ((v + 1) / 2) * plot;
  const chart = svg('svg', {
    class: 'chart', role: 'img', 'aria-label': title, viewBox: `0 0 ${width} ${height}`, width, height,
  }, svg('title', { text: title }));
  rows.forEach((row, i) => {
    const y = i * rowHeight + 4;
    chart.append(svg('text', { x: left - 6, y: y + 14, 'text-anchor': 'end', class: 'axis', text: row.name }));
    if (typeof row.value === 'number') {
      const from = Math.min(x(0), x(row.value));
      chart.append(svg('rect', {
        x: from, y, width: Math.max(1, Math.abs(x(row.value) - x(0))), height: rowHeight - 6,
        class: row.value < 0 ? 'neg' : 'pos',
      }, svg('title', { text: `${row.name}: ${row.value.toFixed(3)} ${row.note || ''}` })));
    }
    chart.append(svg('text', {
      x: x(1) + 4, y: y + 14, class: 'axis',
      text: typeof row.value === 'number' ? row.value.toFixed(2) : 'n/a',
    }));
  });
  const base = rows.length * rowHeight + 8;
  chart.append(svg('line', { x1: x(0), x2: x(0), y1: 0, y2: base, class: 'zero' }));
  for (const v of [-1, 0, 1]) chart.append(svg('text', { x: x(v), y: base + 16, 'text-anchor': 'middle', class: 'axis', text: String(v) }));
  return chart;
}
