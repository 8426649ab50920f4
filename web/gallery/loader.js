// Image requests with a priority and a way out: at most `limit` in flight, the nearest to the
// viewport first (the newest among equals); each sent with `Priority: u=N` (RFC 9218), which
// viewerd-http passes to the daemon; aborted (AbortController: the connection closes, the front
// cancels the render) when its cell or page is no longer wanted.
export class Loader {
  constructor(limit = 6) {
    this.limit = limit;
    this.waiting = new Map(); // key -> job
    this.running = new Map();
    this.stats = { started: 0, loaded: 0, aborted: 0, failed: 0 };
  }

  /// Asks `url` for `key` at `urgency` (0 most urgent); `done(blobURL)` when it comes.
  want(key, url, urgency, done) {
    const job = this.running.get(key) || this.waiting.get(key);
    if (job) {
      job.urgency = urgency;
      return;
    }
    this.waiting.set(key, { key, url, urgency, done });
    this.pump();
  }

  /// Forgets `key`: dropped if waiting, aborted if running.
  drop(key) {
    if (this.waiting.delete(key)) return;
    const job = this.running.get(key);
    if (job) {
      this.running.delete(key);
      job.controller.abort();
      this.stats.aborted++;
      this.pump();
    }
  }

  pump() {
    while (this.running.size < this.limit && this.waiting.size) {
      // Among equals the newest: in a scroll those are the cells that came into view last, the
      // ones that stay longest; the oldest are about to leave and their thumbnail would come late.
      let best = null;
      for (const job of this.waiting.values()) if (!best || job.urgency <= best.urgency) best = job;
      this.waiting.delete(best.key);
      this.start(best);
    }
  }

  start(job) {
    job.controller = new AbortController();
    this.running.set(job.key, job);
    this.stats.started++;
    fetch(job.url, { signal: job.controller.signal, headers: { Priority: `u=${Math.min(7, Math.max(0, job.urgency))}` } })
      .then((response) => {
        if (!response.ok) throw new Error(`${response.status} ${job.url}`);
        return response.blob();
      })
      .then((blob) => {
        if (this.running.get(job.key) !== job) return;
        this.running.delete(job.key);
        this.stats.loaded++;
        job.done(URL.createObjectURL(blob));
        this.pump();
      })
      .catch((error) => {
        if (error.name === "AbortError") return;
        if (this.running.get(job.key) === job) this.running.delete(job.key);
        this.stats.failed++;
        console.warn(`viewerd gallery: ${error.message}`);
        this.pump();
      });
  }
}

/// A box side rounded up to one of a few shared sizes, so caches (the daemon's, nginx's, the
/// browser's) hold one rendition for many cells.
export function bucket(side) {
  for (const size of [128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096]) if (side <= size) return size;
  return 4096;
}

/// The IIIF URL of `item` fitted into a `box` square; `max` when the box is not smaller than
/// the image (IIIF 3 does not upscale without `^`).
export const iiif = (item, box) =>
  `/iiif/3/${item.id}/full/${box >= Math.max(item.width, item.height) ? "max" : `!${box},${box}`}/0/default.jpg`;
