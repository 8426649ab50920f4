import { bucket, iiif } from "./loader.js";
import { ZoomView } from "./zoom.js";
import { placeholderURL } from "./thumbhash.js";

// The full-screen pager: the grid's thumbnail (else the placeholder) at once, the screen-sized
// rendition next, deep zoom (ZoomView) on wheel, pinch or double-click; swipe, arrow keys and
// the wheel page; the neighbours' screen renditions are prefetched and aborted once passed. A
// video shows its poster and plays the original from /media/ by ranges.
export class Pager {
  constructor(element, grid, loader) {
    Object.assign(this, { element, grid, loader });
    this.index = -1;
    this.screens = new Map(); // index -> blob URL of its screen rendition
    this.pages = 0;
    element.innerHTML = `<div class="stage"></div>
      <button class="close" aria-label="Close">×</button>
      <button class="previous" aria-label="Previous">‹</button>
      <button class="next" aria-label="Next">›</button>
      <p class="caption" aria-live="polite"></p>`;
    this.stage = element.querySelector(".stage");
    this.caption = element.querySelector(".caption");
    element.querySelector(".close").onclick = () => this.close();
    element.querySelector(".previous").onclick = () => this.go(this.index - 1);
    element.querySelector(".next").onclick = () => this.go(this.index + 1);
    // On the document: a swipe or a click on the photo leaves the focus on the body, and the
    // keys must still page.
    document.addEventListener("keydown", (event) => { if (this.isOpen) this.key(event); });
    element.addEventListener("wheel", (event) => this.wheel(event), { passive: false });
    this.swipe();
  }

  get isOpen() { return !this.element.hidden; }

  get box() { return bucket(Math.ceil(Math.max(innerWidth, innerHeight) * (devicePixelRatio || 1))); }

  open(index) {
    this.element.hidden = false;
    this.returnFocus = document.activeElement;
    this.show(index);
    this.element.querySelector(".close").focus();
  }

  close() {
    this.element.hidden = true;
    this.zoom?.destroy();
    this.zoom = null;
    for (const key of [...this.loader.running.keys(), ...this.loader.waiting.keys()]) if (String(key).startsWith("page:")) this.loader.drop(key);
    this.stage.replaceChildren();
    this.grid.focus(this.index);
  }

  go(index) {
    if (index < 0 || index >= this.grid.total || index === this.index) return;
    this.show(index);
  }

  show(index) {
    const item = this.grid.items[index];
    if (!item) return;
    this.index = index;
    this.pages++;
    this.zoom?.destroy();
    this.zoom = null;
    this.stage.replaceChildren();
    this.caption.textContent = `${item.name} (${index + 1} of ${this.grid.total})`;
    if (item.kind === "video") {
      const video = document.createElement("video");
      video.controls = true;
      video.preload = "metadata";
      video.src = item.media;
      video.poster = this.atOnce(index);
      video.setAttribute("aria-label", `Video ${item.name}`);
      this.stage.append(video);
      this.video = video;
      if (item.id) this.want(index, 0, (url) => { if (this.index === index) video.poster = url; });
    } else if (item.id) {
      const image = document.createElement("img");
      image.className = "page";
      image.alt = item.name;
      image.src = this.screens.get(index) || this.atOnce(index);
      this.stage.append(image);
      this.image = image;
      this.want(index, 0, (url) => { if (this.index === index) image.src = url; });
    }
    // Neighbours next; anything further is no longer wanted.
    for (const key of [...this.loader.running.keys(), ...this.loader.waiting.keys()]) {
      if (!String(key).startsWith("page:")) continue;
      const other = Number(String(key).slice(5));
      if (Math.abs(other - index) > 1) this.loader.drop(key);
    }
    for (const other of [index + 1, index - 1]) {
      const neighbour = this.grid.items[other];
      if (neighbour?.id && !this.screens.has(other)) this.want(other, 4, () => {});
    }
  }

  /// What a page shows before its screen rendition: the grid's thumbnail, else the placeholder.
  atOnce(index) {
    const item = this.grid.items[index];
    return this.grid.thumbnail(index) || (item.placeholder ? placeholderURL(item.placeholder) : "");
  }

  want(index, urgency, done) {
    const known = this.screens.get(index);
    if (known) return done(known);
    const item = this.grid.items[index];
    this.loader.want(`page:${index}`, iiif(item, this.box), urgency, (url) => {
      this.screens.set(index, url);
      if (this.screens.size > 12) {
        const [oldest, old] = this.screens.entries().next().value;
        URL.revokeObjectURL(old);
        this.screens.delete(oldest);
      }
      done(url);
    });
  }

  /// Deep zoom on the current photo, `scale` device pixels per image pixel at (x, y) of the stage.
  zoomTo(scale, x = innerWidth / 2, y = innerHeight / 2) {
    const item = this.grid.items[this.index];
    if (!item || item.kind !== "photo") return null;
    if (!this.zoom) this.zoom = new ZoomView(this.stage, item, this.image?.src, this.loader);
    this.zoom.zoomAt(scale, x, y);
    return this.zoom;
  }

  key(event) {
    const actions = {
      ArrowRight: () => this.go(this.index + 1), ArrowLeft: () => this.go(this.index - 1), Escape: () => this.close(),
      "+": () => this.zoomTo((this.zoom?.scale || this.fitScale()) * 2), "-": () => this.zoom?.zoomAt(this.zoom.scale / 2),
    };
    if (actions[event.key]) {
      event.preventDefault();
      actions[event.key]();
    }
  }

  fitScale() {
    const item = this.grid.items[this.index];
    return item ? Math.min(innerWidth / item.width, innerHeight / item.height) * devicePixelRatio : 1;
  }

  wheel(event) {
    event.preventDefault();
    if (event.ctrlKey || this.zoom) {
      const factor = Math.exp(-event.deltaY / 300);
      this.zoomTo((this.zoom?.scale || this.fitScale()) * factor, event.clientX, event.clientY);
      if (this.zoom && this.zoom.scale <= this.fitScale() * 1.01) {
        this.zoom.destroy();
        this.zoom = null;
      }
      return;
    }
    const now = performance.now();
    if (now - (this.lastWheel || 0) < 250) return;
    this.lastWheel = now;
    this.go(this.index + (event.deltaY + event.deltaX > 0 ? 1 : -1));
  }

  swipe() {
    const pointers = new Map();
    let start = null, pinch = null;
    this.stage.addEventListener("pointerdown", (event) => {
      pointers.set(event.pointerId, event);
      this.stage.setPointerCapture(event.pointerId);
      if (pointers.size === 1) start = { x: event.clientX, y: event.clientY };
      if (pointers.size === 2) {
        const [a, b] = [...pointers.values()];
        pinch = { distance: Math.hypot(a.clientX - b.clientX, a.clientY - b.clientY), scale: this.zoom?.scale || this.fitScale() };
      }
    });
    this.stage.addEventListener("pointermove", (event) => {
      if (!pointers.has(event.pointerId)) return;
      const previous = pointers.get(event.pointerId);
      pointers.set(event.pointerId, event);
      if (pinch && pointers.size === 2) {
        const [a, b] = [...pointers.values()];
        const distance = Math.hypot(a.clientX - b.clientX, a.clientY - b.clientY);
        this.zoomTo(pinch.scale * (distance / pinch.distance), (a.clientX + b.clientX) / 2, (a.clientY + b.clientY) / 2);
      } else if (this.zoom) {
        this.zoom.panBy(event.clientX - previous.clientX, event.clientY - previous.clientY);
      }
    });
    const end = (event) => {
      if (!pointers.has(event.pointerId)) return;
      pointers.delete(event.pointerId);
      if (pinch) {
        if (!pointers.size) pinch = null;
        return;
      }
      if (start && !this.zoom) {
        const dx = event.clientX - start.x;
        if (Math.abs(dx) > 40 && Math.abs(dx) > Math.abs(event.clientY - start.y)) this.go(this.index + (dx < 0 ? 1 : -1));
      }
      start = null;
    };
    this.stage.addEventListener("pointerup", end);
    this.stage.addEventListener("pointercancel", end);
    this.stage.addEventListener("dblclick", (event) => {
      if (this.zoom) {
        this.zoom.destroy();
        this.zoom = null;
      } else {
        this.zoomTo(devicePixelRatio || 1, event.clientX, event.clientY);
      }
    });
  }
}
