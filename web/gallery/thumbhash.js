// A ThumbHash (https://evanw.github.io/thumbhash/, the placeholder the daemon's LAYOUT sends)
// decoded to RGBA: the same algorithm as Sources/ThumbHash, written again for the page.
export function decodeThumbHash(hash) {
  const { PI, min, max, cos, round } = Math;
  const header24 = hash[0] | (hash[1] << 8) | (hash[2] << 16);
  const header16 = hash[3] | (hash[4] << 8);
  const lDC = (header24 & 63) / 63;
  const pDC = ((header24 >> 6) & 63) / 31.5 - 1;
  const qDC = ((header24 >> 12) & 63) / 31.5 - 1;
  const lScale = ((header24 >> 18) & 31) / 31;
  const hasAlpha = header24 >> 23;
  const pScale = ((header16 >> 3) & 63) / 63;
  const qScale = ((header16 >> 9) & 63) / 63;
  const isLandscape = header16 >> 15;
  const lx = max(3, isLandscape ? (hasAlpha ? 5 : 7) : header16 & 7);
  const ly = max(3, isLandscape ? header16 & 7 : hasAlpha ? 5 : 7);
  const aDC = hasAlpha ? (hash[5] & 15) / 15 : 1;
  const aScale = (hash[5] >> 4) / 15;
  const acStart = hasAlpha ? 6 : 5;
  let acIndex = 0;
  const channel = (nx, ny, scale) => {
    const ac = [];
    for (let cy = 0; cy < ny; cy++)
      for (let cx = cy ? 0 : 1; cx * ny < nx * (ny - cy); cx++, acIndex++)
        ac.push((((hash[acStart + (acIndex >> 1)] >> ((acIndex & 1) << 2)) & 15) / 7.5 - 1) * scale);
    return ac;
  };
  const lAC = channel(lx, ly, lScale);
  const pAC = channel(3, 3, pScale * 1.25);
  const qAC = channel(3, 3, qScale * 1.25);
  const aAC = hasAlpha ? channel(5, 5, aScale) : null;
  const ratio = lx / ly;
  const w = round(ratio > 1 ? 32 : 32 * ratio);
  const h = round(ratio > 1 ? 32 / ratio : 32);
  const rgba = new Uint8ClampedArray(w * h * 4);
  const fx = [], fy = [];
  for (let y = 0, i = 0; y < h; y++) {
    for (let x = 0; x < w; x++, i += 4) {
      let l = lDC, p = pDC, q = qDC, a = aDC;
      for (let cx = 0, n = max(lx, hasAlpha ? 5 : 3); cx < n; cx++) fx[cx] = cos((PI / w) * (x + 0.5) * cx);
      for (let cy = 0, n = max(ly, hasAlpha ? 5 : 3); cy < n; cy++) fy[cy] = cos((PI / h) * (y + 0.5) * cy);
      for (let cy = 0, j = 0; cy < ly; cy++)
        for (let cx = cy ? 0 : 1, fy2 = fy[cy] * 2; cx * ly < lx * (ly - cy); cx++, j++) l += lAC[j] * fx[cx] * fy2;
      for (let cy = 0, j = 0; cy < 3; cy++)
        for (let cx = cy ? 0 : 1, fy2 = fy[cy] * 2; cx < 3 - cy; cx++, j++) {
          const f = fx[cx] * fy2;
          p += pAC[j] * f;
          q += qAC[j] * f;
        }
      if (aAC)
        for (let cy = 0, j = 0; cy < 5; cy++)
          for (let cx = cy ? 0 : 1, fy2 = fy[cy] * 2; cx < 5 - cy; cx++, j++) a += aAC[j] * fx[cx] * fy2;
      const b = l - (2 / 3) * p;
      const r = (3 * l - b + q) / 2;
      const g = r - q;
      rgba[i] = 255 * min(1, r);
      rgba[i + 1] = 255 * min(1, g);
      rgba[i + 2] = 255 * min(1, b);
      rgba[i + 3] = 255 * min(1, a);
    }
  }
  return { width: w, height: h, rgba };
}

/// Paints a base64 ThumbHash into `canvas` (scaled up by CSS: it is a blur).
export function paintPlaceholder(canvas, base64) {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  const { width, height, rgba } = decodeThumbHash(bytes);
  canvas.width = width;
  canvas.height = height;
  canvas.getContext("2d").putImageData(new ImageData(rgba, width, height), 0, 0);
}

/// A base64 ThumbHash as a data: URL of its small PNG, for an <img> (the pager's first image
/// of a page whose thumbnail the grid never loaded).
export function placeholderURL(base64) {
  const canvas = document.createElement("canvas");
  paintPlaceholder(canvas, base64);
  return canvas.toDataURL();
}
