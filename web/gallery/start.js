// A classic script, run as the page's head is read: the album's first layout window is asked
// now, while the modules load (main.js takes it over), not after them. Not inline: the page's
// Content-Security-Policy allows scripts of this server only. The window is about three
// screens of cells at the grid's row height, no more: a cold LAYOUT costs the daemon an INFO
// per item for its placeholder.
(() => {
  const decoded = (segment) => { try { return decodeURIComponent(segment); } catch { return segment; } };
  const segments = location.pathname.replace(/^\/gallery\/?/, "").split("/").filter(Boolean).map(decoded);
  const row = innerWidth < 600 ? 110 : 180;
  const start = {
    segments,
    order: new URLSearchParams(location.search).get("order") === "modified" ? "modified" : "name",
    firstWindow: Math.min(1000, Math.max(50, Math.ceil((3 * innerWidth * innerHeight) / (row * row)))),
    api: "/gallery/api/layout/" + segments.map(encodeURIComponent).join("/"),
  };
  if (segments.length) start.first = fetch(`${start.api}?offset=0&limit=${start.firstWindow}&order=${start.order}`);
  window.galleryStart = start;
})();
