import { justify, rowAt } from "./layout.js";
import { paintPlaceholder } from "./thumbhash.js";
import { bucket, iiif } from "./loader.js";

// The virtualized grid: cells absolutely positioned in a layer that stays in view (sticky),
// over a spacer whose height is the content's, capped at MAX_SCROLL (Chromium cannot make an
// element taller than 2^24 px: Immich #16788). Past the cap the scroll position is mapped
// linearly onto the content, so every row is reachable. Only the cells near the viewport
// exist; each shows its placeholder at once and its thumbnail when it comes.
const MAX_SCROLL = 8_000_000;
const GAP = 4;
const OVERSCAN = 1.0; // viewports above and below kept as cells (and loaded)

export class Grid {
  constructor(scroller, layer, spacer, loader, onOpen) {
    Object.assign(this, { scroller, layer, spacer, loader, onOpen });
    this.items = [];
    this.total = 0;
    this.cells = new Map(); // index -> element
    this.thumbs = new Map(); // index -> { url, box }: its blob URL and the box asked (the pager reuses them)
    this.frames = { sampled: 0, blank: 0 };
    this.focusIndex = 0;
    scroller.addEventListener("scroll", () => this.schedule());
    new ResizeObserver(() => this.relayout()).observe(scroller);
    layer.addEventListener("click", (event) => {
      const cell = event.target.closest(".cell");
      if (cell) this.onOpen(Number(cell.dataset.index));
    });
    layer.addEventListener("keydown", (event) => this.key(event));
    // What srcset would do: when the device pixel ratio changes (browser zoom, another
    // screen), the cells in view ask their thumbnails again at the new density.
    const watch = () => matchMedia(`(resolution: ${devicePixelRatio}dppx)`)
      .addEventListener("change", () => { watch(); this.update(); }, { once: true });
    watch();
  }

  setItems(items, total) {
    this.items = items;
    this.total = total;
    this.relayout();
  }

  relayout() {
    const width = this.scroller.clientWidth - 2 * GAP;
    if (width <= 0) return;
    const target = width < 600 ? 110 : 180;
    const count = this.total;
    const aspects = new Float32Array(count);
    for (let i = 0; i < count; i++) {
      const item = this.items[i];
      aspects[i] = item && item.width > 0 && item.height > 0 ? Math.min(4, Math.max(0.25, item.width / item.height)) : 1.5;
    }
    const anchor = this.layout ? this.firstVisible() : 0;
    this.layout = justify(aspects, count, width, target, GAP);
    const view = this.scroller.clientHeight;
    this.layer.style.height = `${view}px`;
    this.spacer.style.height = `${Math.max(0, Math.min(MAX_SCROLL, this.layout.height + 2 * GAP) - view)}px`;
    // The cells whose item is unchanged stay (update() moves them): a background window of the
    // layout, or a resize, must not make the first screen's cells and images again.
    for (const [index, cell] of this.cells) {
      if (cell.item === this.items[index]) continue;
      this.loader.drop(index);
      cell.remove();
      this.cells.delete(index);
    }
    if (anchor) this.scrollToIndex(anchor);
    this.update();
  }

  /// Content y of the top of the viewport.
  get contentTop() {
    const scrollRange = this.scroller.scrollHeight - this.scroller.clientHeight;
    const contentRange = this.layout.height + 2 * GAP - this.scroller.clientHeight;
    if (scrollRange <= 0 || contentRange <= scrollRange) return this.scroller.scrollTop;
    return (this.scroller.scrollTop / scrollRange) * contentRange;
  }

  scrollToContent(y) {
    const scrollRange = this.scroller.scrollHeight - this.scroller.clientHeight;
    const contentRange = this.layout.height + 2 * GAP - this.scroller.clientHeight;
    this.scroller.scrollTop = contentRange <= scrollRange ? y : (y / contentRange) * scrollRange;
  }

  scrollToIndex(index) {
    const row = this.layout.row[index];
    this.scrollToContent(this.layout.rowTop[row] - GAP);
  }

  firstVisible() {
    const row = rowAt(this.layout, this.contentTop);
    return this.layout.rowStart[row] || 0;
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.update();
    });
  }

  /// Places the cells of the rows near the viewport, recycles the others (their loads aborted).
  update() {
    if (!this.layout || !this.total) return;
    const view = this.scroller.clientHeight;
    const top = this.contentTop;
    const first = rowAt(this.layout, top - OVERSCAN * view);
    const last = rowAt(this.layout, top + view * (1 + OVERSCAN));
    const start = this.layout.rowStart[first];
    const end = last + 1 < this.layout.rowStart.length ? this.layout.rowStart[last + 1] : this.total;
    for (const [index, cell] of this.cells) {
      if (index < start || index >= end) {
        this.loader.drop(index);
        cell.remove();
        this.cells.delete(index);
      }
    }
    for (let index = start; index < end; index++) {
      let cell = this.cells.get(index);
      if (!cell) {
        cell = this.makeCell(index);
        this.cells.set(index, cell);
        this.layer.append(cell);
      }
      const row = this.layout.row[index];
      const y = this.layout.rowTop[row] - top + GAP;
      const height = this.layout.rowHeight[row];
      cell.style.transform = `translate(${this.layout.x[index] + GAP}px, ${y}px)`;
      cell.style.width = `${this.layout.w[index]}px`;
      cell.style.height = `${height}px`;
      const distance = y + height < 0 ? -(y + height) : y > view ? y - view : 0;
      this.request(index, cell, distance / view, Math.max(this.layout.w[index], height));
    }
  }

  makeCell(index) {
    const item = this.items[index];
    const cell = document.createElement("button");
    cell.item = item;
    cell.className = "cell";
    cell.dataset.index = index;
    cell.setAttribute("role", "listitem");
    cell.tabIndex = index === this.focusIndex ? 0 : -1;
    if (!item) {
      cell.classList.add("unknown");
      cell.setAttribute("aria-label", "loading");
      return cell;
    }
    cell.setAttribute("aria-label", `${item.kind === "video" ? "Video" : "Photo"} ${item.name}`);
    if (item.placeholder) {
      const canvas = document.createElement("canvas");
      canvas.className = "placeholder";
      paintPlaceholder(canvas, item.placeholder);
      cell.append(canvas);
      cell.classList.add("painted");
    }
    if (item.kind === "video") cell.classList.add("video");
    if (item.kind === "error") cell.classList.add("error");
    const known = this.thumbs.get(index);
    if (known) this.show(cell, known.url, item, known.box);
    return cell;
  }

  request(index, cell, distance, side) {
    const item = this.items[index];
    if (!item || !item.id) return;
    const box = bucket(Math.ceil(side * (window.devicePixelRatio || 1)));
    if (Number(cell.dataset.loaded || 0) >= box) return; // as sharp as the screen needs
    const urgency = distance <= 0 ? 0 : distance < 0.5 ? 2 : distance < 1 ? 3 : 5;
    this.loader.want(index, iiif(item, box), urgency, (url) => {
      this.remember(index, url, box);
      const current = this.cells.get(index);
      if (current) this.show(current, url, item, box);
    });
  }

  /// The blob URL of the thumbnail `index` has, if any.
  thumbnail(index) { return this.thumbs.get(index)?.url; }

  remember(index, url, box) {
    this.thumbs.set(index, { url, box });
    if (this.thumbs.size > 1500) {
      const [oldest, old] = this.thumbs.entries().next().value;
      if (!this.cells.has(oldest)) URL.revokeObjectURL(old.url);
      this.thumbs.delete(oldest);
    }
  }

  /// Shows `url` (asked in `box`) over what the cell shows; a softer one it replaces goes once
  /// the sharper has loaded. `loaded` is the box, or Infinity for the photo whole ("max").
  show(cell, url, item, box) {
    const previous = cell.querySelector("img.thumb");
    cell.dataset.loaded = box >= Math.max(item.width, item.height) ? "Infinity" : String(box);
    const image = document.createElement("img");
    image.className = "thumb";
    image.alt = item.name;
    image.src = url;
    image.decoding = "async";
    if (previous) image.onload = () => { previous.remove(); if (previous.src !== url) URL.revokeObjectURL(previous.src); };
    cell.append(image);
  }

  /// For the tests and the bench: whether every cell in view has at least its placeholder.
  sample() {
    const view = this.scroller.clientHeight;
    let blank = 0, shown = 0;
    for (const cell of this.cells.values()) {
      const box = cell.getBoundingClientRect();
      const scroller = this.scroller.getBoundingClientRect();
      if (box.bottom < scroller.top || box.top > scroller.top + view) continue;
      shown++;
      if (!cell.classList.contains("painted") && !cell.dataset.loaded) blank++;
    }
    this.frames.sampled++;
    if (blank) this.frames.blank++;
    return { shown, blank };
  }

  key(event) {
    const cell = event.target.closest(".cell");
    if (!cell) return;
    let index = Number(cell.dataset.index);
    const moves = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: 4, ArrowUp: -4 };
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      this.onOpen(index);
      return;
    }
    if (!(event.key in moves)) return;
    event.preventDefault();
    index = Math.max(0, Math.min(this.total - 1, index + moves[event.key]));
    this.focus(index);
  }

  focus(index) {
    this.focusIndex = index;
    if (!this.cells.has(index)) {
      this.scrollToIndex(index);
      this.update();
    }
    for (const cell of this.cells.values()) cell.tabIndex = -1;
    const cell = this.cells.get(index);
    if (cell) {
      cell.tabIndex = 0;
      cell.focus({ preventScroll: false });
    }
  }
}
