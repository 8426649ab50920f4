// A small tiled viewer over the IIIF info.json: the screen rendition stretched underneath, and
// on top the tiles of the pyramid level that matches the scale (scale factor f: the largest
// of info.json's scaleFactors with f <= 1 / scale), only those in view, each a tile URL the
// daemon stores as its own pyramid's tile. Tiles that leave the view are aborted.
export class ZoomView {
  constructor(stage, item, baseURL, loader) {
    Object.assign(this, { stage, item, loader });
    this.element = document.createElement("div");
    this.element.className = "zoom";
    this.base = document.createElement("img");
    this.base.className = "zoom-base";
    this.base.alt = item.name;
    if (baseURL) this.base.src = baseURL;
    this.layer = document.createElement("div");
    this.layer.className = "tiles";
    this.element.append(this.base, this.layer);
    stage.replaceChildren(this.element);
    this.tiles = new Map(); // key -> img
    this.scale = 1;
    this.ox = 0;
    this.oy = 0;
    this.loadedTiles = 0;
    this.info = fetch(`/iiif/3/${item.id}/info.json`).then((response) => response.json());
    this.info.then(() => this.render());
  }

  get view() { return { width: this.stage.clientWidth, height: this.stage.clientHeight }; }

  /// `scale` device pixels per image pixel, keeping the image point under (x, y) in place.
  zoomAt(scale, x = this.view.width / 2, y = this.view.height / 2) {
    const dpr = devicePixelRatio || 1;
    const fit = Math.min(this.view.width / this.item.width, this.view.height / this.item.height) * dpr;
    scale = Math.max(fit, Math.min(8, scale));
    if (!this.placed) {
      // First zoom: from the fitted, centred image.
      this.scale = fit;
      this.ox = -(this.view.width * dpr / fit - this.item.width) / 2;
      this.oy = -(this.view.height * dpr / fit - this.item.height) / 2;
      this.placed = true;
    }
    const px = this.ox + (x * dpr) / this.scale, py = this.oy + (y * dpr) / this.scale;
    this.scale = scale;
    this.ox = px - (x * dpr) / scale;
    this.oy = py - (y * dpr) / scale;
    this.render();
  }

  panBy(dx, dy) {
    const dpr = devicePixelRatio || 1;
    this.ox -= (dx * dpr) / this.scale;
    this.oy -= (dy * dpr) / this.scale;
    this.render();
  }

  render() {
    const dpr = devicePixelRatio || 1;
    const css = this.scale / dpr; // CSS px per image px
    // Positions on whole device pixels: at 1:1 each tile's pixels are the screen's, not resampled.
    const snap = (v) => Math.round(v * dpr) / dpr;
    this.base.style.transform = `translate(${snap(-this.ox * css)}px, ${snap(-this.oy * css)}px)`;
    this.base.style.width = `${this.item.width * css}px`;
    this.base.style.height = `${this.item.height * css}px`;
    this.info.then((info) => {
      const tile = info.tiles?.[0];
      if (!tile) return;
      const side = tile.width;
      const factors = tile.scaleFactors.slice().sort((a, b) => a - b);
      let f = factors[0];
      for (const factor of factors) if (factor <= 1 / this.scale + 1e-9) f = factor;
      const span = side * f;
      const { width, height } = this.view;
      const x0 = Math.max(0, Math.floor(this.ox / span)), y0 = Math.max(0, Math.floor(this.oy / span));
      const x1 = Math.min(Math.ceil(this.item.width / span), Math.ceil((this.ox + (width * dpr) / this.scale) / span));
      const y1 = Math.min(Math.ceil(this.item.height / span), Math.ceil((this.oy + (height * dpr) / this.scale) / span));
      const wanted = new Set();
      for (let row = y0; row < y1; row++) {
        for (let column = x0; column < x1; column++) {
          const x = column * span, y = row * span;
          const w = Math.min(span, this.item.width - x), h = Math.min(span, this.item.height - y);
          const key = `tile:${f}:${column}:${row}`;
          wanted.add(key);
          let image = this.tiles.get(key);
          if (!image) {
            image = document.createElement("img");
            image.className = "tile";
            image.alt = "";
            this.tiles.set(key, image);
            this.layer.append(image);
            const url = `/iiif/3/${this.item.id}/${x},${y},${w},${h}/${Math.ceil(w / f)},/0/default.jpg`;
            image.dataset.region = `${x},${y},${w},${h}`;
            this.loader.want(key, url, 0, (blob) => {
              image.src = blob;
              image.onload = () => { image.dataset.loaded = "1"; this.loadedTiles++; };
            });
          }
          image.style.transform = `translate(${snap((x - this.ox) * css)}px, ${snap((y - this.oy) * css)}px)`;
          image.style.width = `${w * css}px`;
          image.style.height = `${h * css}px`;
        }
      }
      for (const [key, image] of this.tiles) {
        if (wanted.has(key)) continue;
        this.loader.drop(key);
        if (image.src) URL.revokeObjectURL(image.src);
        image.remove();
        this.tiles.delete(key);
      }
    });
  }

  /// Whether every tile in view has come (for the tests).
  get complete() {
    return this.tiles.size > 0 && [...this.tiles.values()].every((image) => image.dataset.loaded);
  }

  destroy() {
    for (const key of this.tiles.keys()) this.loader.drop(key);
    this.tiles.clear();
    this.element.remove();
  }
}
