import { Loader } from "./loader.js";
import { Grid } from "./grid.js";
import { Pager } from "./pager.js";

// The page's start: /gallery/ lists the roots, /gallery/ROOT/PATH is that folder's album. The
// layout comes in windows: a small first one (the first screen's sizes and placeholders at
// once), asked by start.js before the modules load (its size is said there),
// then large ones in the background until the folder is whole.
const WINDOW = 5000;
const { segments, order, firstWindow, api } = window.galleryStart;

const $ = (id) => document.getElementById(id);

function message(text) {
  $("message").hidden = false;
  $("message").textContent = text;
}

function crumbs() {
  const nav = $("crumbs");
  const link = (text, href) => Object.assign(document.createElement("a"), { textContent: text, href });
  nav.append(link("Gallery", "/gallery/"));
  let href = "/gallery";
  for (const segment of segments) {
    href += "/" + encodeURIComponent(segment);
    nav.append(" / ", link(segment, href + "/"));
  }
}

async function json(url, asked = fetch(url)) {
  const response = await asked;
  if (!response.ok) throw new Error(`${response.status}: ${(await response.text()).trim()}`);
  return response.json();
}

function links(names, base) {
  const nav = $("folders");
  for (const name of names) {
    nav.append(Object.assign(document.createElement("a"), { textContent: name, href: `${base}/${encodeURIComponent(name)}/` }));
  }
}

async function album() {
  const loader = new Loader();
  let pager;
  const grid = new Grid($("scroller"), $("grid"), $("spacer"), loader, (index) => pager.open(index));
  pager = new Pager($("pager"), grid, loader);
  window.gallery = { grid, pager, loader };
  const first = await json(`${api}?offset=0&limit=${firstWindow}&order=${order}`, window.galleryStart.first);
  links(first.folders, location.pathname.replace(/\/$/, ""));
  const items = new Array(first.total);
  const place = (answer) => { for (const item of answer.items) items[item.index] = item; };
  place(first);
  $("count").textContent = `${first.total} items`;
  grid.setItems(items, first.total);
  performance.mark("gallery-placeholders");
  if (!first.total) message("This folder has no photos or videos.");
  for (let offset = first.items.length; offset < first.total; offset += WINDOW) {
    place(await json(`${api}?offset=${offset}&limit=${WINDOW}&order=${order}`));
    grid.setItems(items, first.total);
  }
  window.gallery.complete = true;
}

async function roots() {
  const answer = await json("/gallery/api/roots");
  $("scroller").hidden = true;
  links(answer.roots, "/gallery");
  if (!answer.roots.length) message("No roots: start viewerd-http with --root NAME=DIR.");
}

crumbs();
(segments.length ? album() : roots()).catch((error) => message(`The gallery could not load: ${error.message}`));
