// The justified layout: rows of a target height, each scaled to fill the width exactly (the
// last row left at the target). Typed arrays, so 100,000 items lay out in a few milliseconds.
export function justify(aspects, count, width, target, gap) {
  const x = new Float32Array(count), w = new Float32Array(count), row = new Int32Array(count);
  const rowTop = [], rowHeight = [], rowStart = [];
  let top = 0, start = 0;
  while (start < count) {
    let sum = 0, end = start;
    while (end < count) {
      sum += aspects[end];
      end++;
      if (sum * target + (end - start - 1) * gap >= width) break;
    }
    const gaps = (end - start - 1) * gap;
    const full = sum * target + gaps >= width;
    const height = full ? Math.max(1, (width - gaps) / sum) : target;
    let left = 0;
    for (let i = start; i < end; i++) {
      x[i] = left;
      w[i] = aspects[i] * height;
      row[i] = rowTop.length;
      left += w[i] + gap;
    }
    rowTop.push(top);
    rowHeight.push(height);
    rowStart.push(start);
    top += height + gap;
    start = end;
  }
  return { x, w, row, rowTop, rowHeight, rowStart, height: Math.max(0, top - gap) };
}

/// The first row whose bottom is below `y` (binary search).
export function rowAt(layout, y) {
  let low = 0, high = layout.rowTop.length - 1;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (layout.rowTop[mid] + layout.rowHeight[mid] < y) low = mid + 1;
    else high = mid;
  }
  return Math.max(0, low);
}
